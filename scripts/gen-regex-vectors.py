#!/usr/bin/env python3
"""Test vectors for the regex -> GBNF compiler (src/grammar/regex.c), decided by Python's `re`.

For each pattern (real `pattern` / `patternProperties` values from JSONSchemaBench, random patterns,
hand-written edge cases) this writes JSON-escaped strings that the pattern matches and strings it
does not, under JSON Schema's semantics (unanchored search; ECMAScript's \\d \\w \\s, `.` and `$`).
tests/unit/test_regex.c checks that the compiled grammar accepts exactly the first list.

The ECMAScript pattern is translated to an equivalent Python pattern first (`to_python`): class
escapes become explicit sets (ECMAScript's \\s has the Unicode spaces, Python's has \\x1c-\\x1f and
not \\ufeff), `.` excludes \\n \\r \\u2028 \\u2029, `$` is `\\Z` (Python's `$` also matches before a
final newline), `{` that is not a quantifier is literal (Python reads `{,3}` as one), `[]` and `[^]`
match nothing and anything, `(?<n>` is `(?P<n>`. Every character of a class is written as an escape,
so Python's own class parsing quirks (`[[`, `--` warnings) do not apply. Patterns using what the
compiler refuses (lookaround, backreferences, \\b) are kept with "expect": "unsupported".

The string encoding is Python's json.dumps (ensure_ascii=False): printable characters as
themselves, \\" \\\\ \\b \\f \\n \\r \\t and \\u00xx for the other controls; it is the canonical
spelling the grammar derives.

usage: gen-regex-vectors.py [--bench DIR] [--out FILE] [--seed N]
"""
import argparse
import json
import multiprocessing
import os
import random
import re
import sys

try:
    import re._parser as sre_parse  # Python >= 3.11
    import re._constants as C
except ImportError:  # pragma: no cover
    import sre_parse
    import sre_constants as C

SPACES = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
          (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
DIGITS = [(0x30, 0x39)]
WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
LINES = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]


class Unsupported(Exception):
    pass


class Untranslatable(Exception):
    pass


def esc_cp(c):
    return "\\x%02x" % c if c < 0x100 else "\\u%04x" % c if c < 0x10000 else "\\U%08x" % c


def set_text(ranges):
    return "".join(esc_cp(a) if a == b else esc_cp(a) + "-" + esc_cp(b) for a, b in ranges)


def to_python(p):
    """ECMAScript pattern -> (Python pattern, uses unsupported constructs)."""
    out = []
    i = 0
    n = len(p)
    unsupported = False
    ngroups = 0

    def quant_at(j):
        m = re.match(r"\{(\d+)(,(\d*))?\}", p[j:])
        return m

    def read_escape(j, in_class):
        """-> (kind, value, next index); kind 'cp' or 'set' (ranges, negated)."""
        nonlocal unsupported
        if j >= n:
            raise Untranslatable("trailing backslash")
        c = p[j]
        if c in "dDwWsS":
            tab = {"d": DIGITS, "w": WORD, "s": SPACES}[c.lower()]
            return "set", (tab, c.isupper()), j + 1
        simple = {"t": 9, "n": 10, "r": 13, "f": 12, "v": 11}
        if c in simple:
            return "cp", simple[c], j + 1
        if c == "0":
            if j + 1 < n and p[j + 1].isdigit():
                raise Untranslatable("octal")
            return "cp", 0, j + 1
        if c == "c":
            if j + 1 < n and p[j + 1].isascii() and p[j + 1].isalpha():
                return "cp", ord(p[j + 1]) % 32, j + 2
            raise Untranslatable("\\c")
        if c == "x":
            m = re.match(r"[0-9a-fA-F]{2}", p[j + 1:])
            if not m:
                raise Untranslatable("\\x")
            return "cp", int(m.group(0), 16), j + 3
        if c == "u":
            m = re.match(r"\{([0-9a-fA-F]+)\}", p[j + 1:])
            if m:
                v = int(m.group(1), 16)
                if v > 0x10FFFF:
                    raise Untranslatable("\\u{}")
                return "cp", v, j + 1 + len(m.group(0))
            m = re.match(r"[0-9a-fA-F]{4}", p[j + 1:])
            if not m:
                raise Untranslatable("\\u")
            v = int(m.group(0), 16)
            if 0xD800 <= v <= 0xDFFF:
                raise Untranslatable("surrogate escape")
            return "cp", v, j + 5
        if c == "b":
            if in_class:
                return "cp", 8, j + 1
            unsupported = True
            return "raw", "\\b", j + 1
        if c == "B":
            unsupported = True
            return "raw", "\\B", j + 1
        if c.isdigit():
            unsupported = True
            return "raw", "\\" + c, j + 1
        if c == "-" and in_class:
            return "cp", ord("-"), j + 1
        if c.isascii() and c.isalnum():
            raise Untranslatable("escape \\" + c)
        return "cp", ord(c), j + 1

    def parse_class(j):
        """j at '['; -> (python text, next index)."""
        j += 1
        neg = j < n and p[j] == "^"
        if neg:
            j += 1
        items = []  # cp ranges
        sets = []  # (ranges, negated)

        def atom(j):
            if j >= n:
                raise Untranslatable("unterminated class")
            if p[j] == "\\":
                return read_escape(j + 1, True)
            return "cp", ord(p[j]), j + 1

        while True:
            if j >= n:
                raise Untranslatable("unterminated class")
            if p[j] == "]":
                j += 1
                break
            k1, v1, j = atom(j)
            if k1 == "raw":
                raise Untranslatable("class escape")
            if j + 1 < n and p[j] == "-" and p[j + 1] != "]":
                k2, v2, j2 = atom(j + 1)
                if k2 == "raw":
                    raise Untranslatable("class escape")
                if k1 == "set" or k2 == "set":  # Annex B: a literal dash
                    for k, v in ((k1, v1), (k2, v2)):
                        if k == "set":
                            sets.append(v)
                        else:
                            items.append((v, v))
                    items.append((0x2D, 0x2D))
                    j = j2
                    continue
                if v2 < v1:
                    raise Untranslatable("range out of order")
                items.append((v1, v2))
                j = j2
            elif k1 == "set":
                sets.append(v1)
            else:
                items.append((v1, v1))
        pos = [s for s, ng in sets if not ng] + [items]
        negs = [s for s, ng in sets if ng]
        posr = [r for s in pos for r in s]
        if not neg:
            alts = []
            if posr:
                alts.append("[" + set_text(posr) + "]")
            for s in negs:
                alts.append("[^" + set_text(s) + "]")
            if not alts:
                return "(?!)", j
            return "(?:" + "|".join(alts) + ")", j
        # not (P or not A1 or ...) = not P and A1 and ...
        if not negs:
            return ("[^" + set_text(posr) + "]" if posr else "[\\s\\S]"), j
        t = "(?![" + set_text(posr) + "])" if posr else ""
        for s in negs[:-1]:
            t += "(?=[" + set_text(s) + "])"
        return "(?:" + t + "[" + set_text(negs[-1]) + "])", j

    while i < n:
        c = p[i]
        if c == "\\":
            k, v, i = read_escape(i + 1, False)
            if k == "cp":
                out.append(esc_cp(v))
            elif k == "set":
                out.append(("[^" if v[1] else "[") + set_text(v[0]) + "]")
            else:
                out.append(v)
        elif c == "[":
            t, i = parse_class(i)
            out.append(t)
        elif c == ".":
            out.append("[^" + set_text(LINES) + "]")
            i += 1
        elif c == "$":
            out.append("\\Z")
            i += 1
        elif c == "^":
            out.append("^")
            i += 1
        elif c == "(":
            if p.startswith("(?<=", i) or p.startswith("(?<!", i) or p.startswith("(?=", i) or p.startswith("(?!", i):
                unsupported = True
                m = re.match(r"\(\?<?[=!]", p[i:])
                out.append(m.group(0))
                i += len(m.group(0))
            elif p.startswith("(?<", i):
                m = re.match(r"\(\?<([A-Za-z_$][A-Za-z0-9_$]*)>", p[i:])
                if not m:
                    raise Untranslatable("group name")
                ngroups += 1
                out.append("(?P<%s>" % m.group(1).replace("$", "_S_"))
                i += len(m.group(0))
            elif p.startswith("(?:", i):
                out.append("(?:")
                i += 3
            elif p.startswith("(?", i):
                raise Untranslatable("group syntax")
            else:
                ngroups += 1
                out.append("(")
                i += 1
        elif c == "{":
            m = quant_at(i)
            if m and out:
                out.append(m.group(0))
                i += len(m.group(0))
            else:
                out.append("\\{")
                i += 1
        elif c in "}]":
            out.append("\\" + c)
            i += 1
        elif c in "|)*+?":
            out.append(c)
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out), unsupported


class Gen:
    """Random strings from a parsed Python pattern (approximately matching)."""

    def __init__(self, rng):
        self.rng = rng

    def pick_in(self, items):
        rng = self.rng
        neg = any(op == C.NEGATE for op, _ in items)
        ranges = []
        for op, av in items:
            if op == C.LITERAL:
                ranges.append((av, av))
            elif op == C.RANGE:
                ranges.append(av)
        if neg or not ranges:
            for _ in range(20):
                c = self.rand_char()
                if not neg or not any(a <= ord(c) <= b for a, b in ranges):
                    return c
            return self.rand_char()
        a, b = rng.choice(ranges)
        if b - a > 200 and rng.random() < 0.7:
            b = min(b, a + 200)
        for _ in range(10):
            c = rng.randint(a, b)
            if not 0xD800 <= c <= 0xDFFF:
                return chr(c)
        return chr(a)

    def rand_char(self):
        rng = self.rng
        r = rng.random()
        if r < 0.55:
            return chr(rng.randint(0x20, 0x7E))
        pool = "\"\\\n\r\t\x00\x01\x08\x0b\x0c\x1f\x7f\x80\xa0é中\u2028\u2029\ufeff\U0001F600/ -_.0aZ"
        return rng.choice(pool)

    def gen(self, seq, depth=0):
        rng = self.rng
        s = []
        for op, av in seq:
            if op == C.LITERAL:
                s.append(chr(av))
            elif op == C.NOT_LITERAL:
                c = self.rand_char()
                s.append(c if ord(c) != av else "x")
            elif op == C.ANY:
                s.append(self.rand_char())
            elif op == C.IN:
                s.append(self.pick_in(av))
            elif op == C.BRANCH:
                s.append(self.gen(rng.choice(av[1]), depth + 1))
            elif op == C.SUBPATTERN:
                s.append(self.gen(av[3], depth + 1))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, hi = av[0], av[1]
                if hi == C.MAXREPEAT:
                    hi = lo + 4
                hi = min(hi, lo + 6, 60)
                k = rng.randint(min(lo, hi), hi)
                if depth > 6:
                    k = min(k, lo)
                s.extend(self.gen(av[2], depth + 1) for _ in range(k))
            elif op in (C.AT, C.ASSERT, C.ASSERT_NOT, C.GROUPREF):
                pass
        return "".join(s)


def mutate(rng, s, g):
    s = list(s)
    for _ in range(rng.randint(1, 2)):
        r = rng.random()
        k = rng.randint(0, len(s))
        if r < 0.35 and s:
            del s[min(k, len(s) - 1)]
        elif r < 0.7:
            s.insert(k, g.rand_char())
        elif s:
            s[min(k, len(s) - 1)] = g.rand_char()
    return "".join(s)


def enc(s):
    return json.dumps(s, ensure_ascii=False)[1:-1]


def vectors_for(pattern, rng, n_each=12):
    py, unsup = to_python(pattern)
    rx = re.compile(py)
    tree = sre_parse.parse(py)
    if unsup:
        return {"p": pattern, "expect": "unsupported"}
    g = Gen(rng)
    pos, neg = set(), set()
    cands = []
    for _ in range(60):
        s = g.gen(tree)
        cands.append(s)
        if rng.random() < 0.5:
            cands.append("".join(g.rand_char() for _ in range(rng.randint(1, 3))) + s)
        if rng.random() < 0.5:
            cands.append(s + "".join(g.rand_char() for _ in range(rng.randint(1, 3))))
        cands.append(mutate(rng, s, g))
    cands.append("")
    for _ in range(10):
        cands.append("".join(g.rand_char() for _ in range(rng.randint(1, 8))))
    for s in cands:
        if len(s) > 80 or any(0xD800 <= ord(c) <= 0xDFFF for c in s):
            continue
        (pos if rx.search(s) else neg).add(s)
    pos = sorted(pos, key=lambda s: (len(s), s))
    neg = sorted(neg, key=lambda s: (len(s), s))
    rng.shuffle(pos)
    rng.shuffle(neg)
    return {"p": pattern, "expect": "ok", "match": [enc(s) for s in sorted(pos[:n_each])],
            "nomatch": [enc(s) for s in sorted(neg[:n_each])]}


def vectors_for_seed(pattern, seed):
    try:
        return vectors_for(pattern, random.Random(seed))
    except (Untranslatable, re.error, RecursionError, OverflowError):
        return None


def random_pattern(rng, depth=0):
    """A random ECMAScript pattern in the supported subset (anchors added by the caller)."""
    lits = "abcxyz019-_./:@ \"\\é"

    def lit():
        c = rng.choice(lits)
        if c in "\\.\"":
            return "\\" + c if c != '"' else c
        return c

    def cls():
        items = []
        for _ in range(rng.randint(1, 3)):
            r = rng.random()
            if r < 0.3:
                a = rng.choice("abx0")
                items.append(a + "-" + chr(ord(a) + rng.randint(0, 5)))
            elif r < 0.5:
                items.append(rng.choice(["\\d", "\\w", "\\s", "\\D", "\\S", "\\W"]))
            elif r < 0.6:
                items.append(rng.choice(["\\n", "\\t", "\\\\", "\"", "\\u00e9", "\\x7f", "\\]", "\\-"]))
            else:
                items.append(rng.choice("abcz_:@.-"))
        return "[" + ("^" if rng.random() < 0.3 else "") + "".join(items) + "]"

    def atom():
        r = rng.random()
        if r < 0.35:
            return lit()
        if r < 0.55:
            return cls()
        if r < 0.62:
            return "."
        if r < 0.72:
            return rng.choice(["\\d", "\\w", "\\s", "\\D", "\\S", "\\W", "\\n", "\\t", "\\u{1F600}", "\\x22", "\\/"])
        if depth < 3:
            inner = random_pattern(rng, depth + 1)
            return rng.choice(["(", "(?:", "(?<g%d>" % rng.randint(0, 99)]) + inner + ")"
        return lit()

    def quant():
        r = rng.random()
        if r < 0.55:
            return ""
        q = rng.choice(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "{0}"])
        return q + ("?" if rng.random() < 0.1 else "")

    def seq():
        return "".join(rng.choice("^$") if rng.random() < 0.07 else atom() + quant()
                       for _ in range(rng.randint(1, 4)))

    alts = [seq() for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 3))]
    return "|".join(alts)


EDGE = [
    "", "^", "$", "^$", "a", "^a", "a$", "^a$", "^a|b$", "^(a|b$)", "(^a|b)c$", "^(?:a|^b)$", "(^|x)y", "x(y|$)",
    "^.*$", "^.+$", ".", "^.$", "^[^]$", "^[]$|z", "[^]", "^\\s*$", "^\\S+$", "^\\w+$", "^\\W$", "^\\d+$", "^\\D$",
    "^[\\s\\S]{2}$", "^[^\\s]$", "^[^\\S]$", "^[\\w-.]+$", "^[\\d-z]+$", "a{,3}", "^a{,3}$", "^x{2,}$", "^(ab){1,3}$",
    "^(a*)*$", "^(a?b?)+$", "^(a|)+c$", "^(?:)$", "^()$", "^a*?b+?c??$", "^\\u{1F600}+$", "^\\u00e9$", "^\\x41\\x42$",
    "^\\cJ$", "^\\0$", "^\\v\\f$", "^[\\b]$", "^\\/\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\\\$", "^\"$", "^\\\\$",
    "^[\"\\\\]+$", "^[^\"\\\\]*$", "\u00e9", "^\u4e2d\u6587$", "^[\u4e00-\u9fff]+$", "^[^a-z]+$", "}", "]", "^{}$",
    "^a{2}{$", "a|b|c", "^(a|b|c)+$", "(?<year>\\d{4})-(?<m>\\d\\d)", "^[a-z]{0}$", "^(?:a|b){0,0}c$", "x*", "(?:y?)+",
    "^[\\n\\r\\t]$", "^[\\x00-\\x1f]$", "^[^\\x20-\\x7e]$", "\\u2028", "^.\\u2029$", "^[\\u2000-\\u200a]$",
    "^\\s$", "^\\-\\_\\%$", "\\bfoo", "(?=a)", "(?!a)b", "(?<=a)b", "(?<!a)b", "(a)\\1", "a^b", "a$b", "(^a)*", "^^a", "a$$",
    "(^a|b)*c", "^([^,]+(,|$)){3,}$", "(?:$|a$){2}", "(a$|c)b?", "x(^y|z)?", "^(\\/?(\\.{2}|[a-z0-9\\-]*)($|\\/))*$",
    "^$[a-z]*$", "^tape\\d+(\\.side[A-Z])?$(\\.alt\\d+)?", "(^|,)a(,|$)", "(?:^|x)+y", "((^a)?b$)+", "(a|^)(b|$){2,3}",
]


def bench_patterns(root):
    pats = set()

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "pattern" and isinstance(x, str):
                    pats.add(x)
                if k == "patternProperties" and isinstance(x, dict):
                    pats.update(x.keys())
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for d, _, fs in os.walk(root):
        for f in sorted(fs):
            try:
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    walk(json.load(fh))
            except (ValueError, OSError):
                pass
    return sorted(pats)


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("STATELM_CACHE", os.path.expanduser("~/.cache/statelm"))
    ap.add_argument("--bench", default=os.path.join(cache, "jsonschemabench", "data"))
    ap.add_argument("--out", default="tests/data/grammar/regex/vectors.json")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--n-bench", type=int, default=220)
    ap.add_argument("--n-random", type=int, default=220)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    pats = []
    if os.path.isdir(a.bench):
        real = [p for p in bench_patterns(a.bench) if len(p) <= 400]
        rng.shuffle(real)
        pats += [("bench", p) for p in real[: a.n_bench * 2]]
    else:
        print("no JSONSchemaBench at %s: random and edge patterns only" % a.bench, file=sys.stderr)
    pats += [("edge", p) for p in EDGE]
    for _ in range(a.n_random):
        p = random_pattern(rng)
        r = rng.random()
        if r < 0.3:
            p = "^(?:" + p + ")$"
        elif r < 0.4:
            p = "^" + p
        elif r < 0.5:
            p = "(?:" + p + ")$"
        pats.append(("random", p))
    out, seen, n_bench = [], set(), 0
    skipped = 0
    pool = multiprocessing.Pool(1)
    for i, (kind, p) in enumerate(pats):
        if p in seen or (kind == "bench" and n_bench >= a.n_bench):
            continue
        seen.add(p)
        # Python's backtracking can take exponential time on some patterns: those are skipped
        try:
            v = pool.apply_async(vectors_for_seed, (p, a.seed * 100003 + i)).get(timeout=10)
        except multiprocessing.TimeoutError:
            pool.terminate()
            pool = multiprocessing.Pool(1)
            v = None
        if v is None:
            skipped += 1
            continue
        v["src"] = kind
        n_bench += kind == "bench"
        out.append(v)
    pool.terminate()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(v, ensure_ascii=False) for v in out))
        f.write("\n]\n")
    n_ok = sum(v["expect"] == "ok" for v in out)
    n_str = sum(len(v.get("match", [])) + len(v.get("nomatch", [])) for v in out)
    print("%d patterns (%d supported, %d expected refused), %d strings, %d skipped (untranslatable or too slow for re) -> %s"
          % (len(out), n_ok, len(out) - n_ok, n_str, skipped, a.out))


if __name__ == "__main__":
    main()
