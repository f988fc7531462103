"""Random strings from a GBNF grammar (the dialect of docs/grammar.md), for checking a JSON Schema
converter without a model: every string the grammar derives must validate. A random walk: each
alternative and repetition count is drawn uniformly (repetitions at most a few past their minimum);
past a depth or length budget the walk takes the alternatives that end soonest. Classes draw from
their ranges (negated ones from ASCII, a few non-ASCII letters and an emoji).
Used by scripts/schema-corpus.py and tests/py/test_schema_exact.py."""
import random

INF = float("inf")


class Parser:
    def __init__(self, text):
        self.rules = {}
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, _, body = line.partition("::=")
            self.s, self.i = body, 0
            self.rules[name.strip()] = self.alt()

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def alt(self):
        seqs = [self.seq()]
        self.ws()
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            seqs.append(self.seq())
            self.ws()
        return ("alt", seqs)

    def esc(self):
        c = self.s[self.i]
        self.i += 1
        if c != "\\":
            return c
        c = self.s[self.i]
        self.i += 1
        simple = {"n": "\n", "r": "\r", "t": "\t"}
        if c in simple:
            return simple[c]
        n = {"x": 2, "u": 4, "U": 8}.get(c)
        if n:
            v = int(self.s[self.i:self.i + n], 16)
            self.i += n
            return chr(v)
        return c

    def seq(self):
        items = []
        while True:
            self.ws()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                return ("seq", items)
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                out = []
                while self.s[self.i] != '"':
                    out.append(self.esc())
                self.i += 1
                node = ("lit", "".join(out))
            elif c == "[":
                self.i += 1
                neg = self.s[self.i] == "^"
                if neg:
                    self.i += 1
                ranges = []
                while self.s[self.i] != "]":
                    a = self.esc()
                    b = a
                    if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                        self.i += 1
                        b = self.esc()
                    ranges.append((ord(a), ord(b)))
                self.i += 1
                node = ("cls", neg, ranges)
            elif c == "(":
                self.i += 1
                node = self.alt()
                self.ws()
                assert self.s[self.i] == ")", self.s[self.i:]
                self.i += 1
            elif c == ".":
                self.i += 1
                node = ("cls", True, [])
            else:
                j = self.i
                while j < len(self.s) and (self.s[j].isalnum() or self.s[j] in "-_"):
                    j += 1
                assert j > self.i, f"unexpected {self.s[self.i:self.i + 20]!r}"
                node = ("ref", self.s[self.i:j])
                self.i = j
            while self.i < len(self.s) and self.s[self.i] in "*+?{":
                q = self.s[self.i]
                self.i += 1
                if q == "*":
                    node = ("rep", node, 0, INF)
                elif q == "+":
                    node = ("rep", node, 1, INF)
                elif q == "?":
                    node = ("rep", node, 0, 1)
                else:
                    j = self.s.index("}", self.i)
                    part = self.s[self.i:j]
                    self.i = j + 1
                    if "," in part:
                        a, b = part.split(",")
                        node = ("rep", node, int(a), INF if b.strip() == "" else int(b))
                    else:
                        node = ("rep", node, int(part), int(part))
            items.append(node)


POOL = [chr(c) for c in range(0x20, 0x7F)] + ["\u00e9", "\u00df", "\u4e2d", "\U0001F600", "\t"]


class Sampler:
    def __init__(self, text, rng=None):
        self.rules = Parser(text).rules
        self.rng = rng or random.Random(0)
        self.minlen = {k: INF for k in self.rules}
        for _ in range(200):
            changed = False
            for k, v in self.rules.items():
                m = self.ml(v)
                if m < self.minlen[k]:
                    self.minlen[k], changed = m, True
            if not changed:
                break

    def ml(self, n):
        t = n[0]
        if t == "lit":
            return len(n[1])
        if t == "cls":
            return 1
        if t == "ref":
            return self.minlen[n[1]]
        if t == "rep":
            return n[2] * self.ml(n[1]) if n[2] else 0
        if t == "seq":
            return sum(self.ml(x) for x in n[1])
        return min(self.ml(x) for x in n[1])

    def cls(self, neg, ranges):
        inside = lambda cp: any(a <= cp <= b for a, b in ranges)
        if neg:
            return self.rng.choice([c for c in POOL if not inside(ord(c))])
        a, b = self.rng.choice(ranges)
        while True:
            cp = self.rng.randint(a, min(b, a + 2000) if self.rng.random() < 0.8 else b)
            if not 0xD800 <= cp <= 0xDFFF:
                return chr(cp)

    def walk(self, n, out, depth):
        t = n[0]
        tight = depth > 40 or len(out) > 3000
        if t == "lit":
            out.append(n[1])
        elif t == "cls":
            out.append(self.cls(n[1], n[2]))
        elif t == "ref":
            self.walk(self.rules[n[1]], out, depth + 1)
        elif t == "seq":
            for x in n[1]:
                self.walk(x, out, depth)
        elif t == "alt":
            alts = n[1]
            if tight:
                best = min(self.ml(x) for x in alts)
                alts = [x for x in alts if self.ml(x) == best]
            self.walk(self.rng.choice(alts), out, depth + 1)
        else:
            lo, hi = n[2], n[3]
            k = lo if tight else self.rng.randint(lo, int(min(hi, lo + 3)))
            for _ in range(k):
                self.walk(n[1], out, depth + 1)

    def sample(self, root="root"):
        out = []
        self.walk(self.rules[root], out, 0)
        return "".join(out)
