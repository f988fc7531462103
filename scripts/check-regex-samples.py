#!/usr/bin/env python3
"""Random strings derived by the regex grammars, checked with Python (not a CI test).

Runs `test_regex` with SLM_REGEX_SAMPLES=FILE: for every supported pattern of
tests/data/grammar/regex/vectors.json and every format of gr_format_regex, the C side random-walks
the compiled grammar through the engine's matcher and writes the strings it derives (as JSON string
literals). Each must be valid JSON whose decoded value the pattern matches (Python `re.search`,
the pattern translated as in gen-regex-vectors.py) or that python-jsonschema's FormatChecker
accepts for the format (draft 2020-12's checker; install `jsonschema[format]`: rfc3339-validator, fqdn, rfc3987,
isoduration); a pattern whose samples Python's re cannot decide within 20 s is counted as
given up. For date and ipv4, whose regexes claim the whole format, the regex and the checker are
also compared on every date-like string 0000-00-00..9999-13-32 and every octet spelling. Prints the
counts; exits 1 on any failure.

usage: check-regex-samples.py BUILD/tests/test_regex
"""
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
gen = __import__("gen-regex-vectors")

import jsonschema  # noqa: E402


def pattern_failures(pattern, samples):
    py, _ = gen.to_python(pattern)
    rx = re.compile(py)
    return [s for s in samples if not rx.search(s)]


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "samples.jsonl")
        env = dict(os.environ, SLM_REGEX_SAMPLES=out)
        subprocess.run([exe], env=env, check=True)
        lines = [l for l in open(out, encoding="utf-8", newline="").read().split("\n") if l]
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    n = {"pattern": 0, "format": 0}
    bad = 0
    per_format = {}
    regexes = {}
    for line in lines:
        rec = json.loads(line)
        if "format_regex" in rec:
            regexes[rec["format_regex"]] = re.compile(gen.to_python(rec["re"])[0])
            continue
        for s in rec["s"]:
            if "p" in rec:
                continue
            else:
                f = rec["format"]
                n["format"] += 1
                per_format[f] = per_format.get(f, 0) + 1
                try:
                    ok = checker.conforms(s, f)
                except Exception as e:  # a checker that raises instead of refusing
                    ok = False
                    print("checker raised %r" % e)
                if not ok:
                    bad += 1
                    print("FAIL format %s derives %r" % (f, s))
    # patterns: Python's backtracking can take exponential time on some samples: such a pattern is
    # given up after 20 s (counted, not a failure)
    pool = multiprocessing.Pool(1)
    slow = 0
    for line in lines:
        rec = json.loads(line)
        if "p" not in rec:
            continue
        try:
            fails = pool.apply_async(pattern_failures, (rec["p"], rec["s"])).get(timeout=20)
        except multiprocessing.TimeoutError:
            pool.terminate()
            pool = multiprocessing.Pool(1)
            slow += 1
            continue
        n["pattern"] += len(rec["s"])
        for f in fails:
            bad += 1
            print("FAIL /%s/ derives %r" % (rec["p"], f))
    pool.terminate()
    print("patterns given up (Python's re too slow on their samples): %d" % slow)
    # exhaustive where the format's regex claims the whole format: every year 0000-9999 with every
    # month 00-13 and day 00-32 for date, every octet spelling up to three digits for ipv4
    n_exh = 0
    for y in range(10000):
        for mo in range(14):
            for d in range(33):
                s = "%04d-%02d-%02d" % (y, mo, d)
                n_exh += 1
                if bool(regexes["date"].search(s)) != checker.conforms(s, "date"):
                    bad += 1
                    print("FAIL date regex and checker disagree on %r" % s)
    octets = [str(i) for i in range(1000)] + ["%02d" % i for i in range(100)] + ["%03d" % i for i in range(100)]
    for o in octets:
        for s in ("%s.1.2.3" % o, "1.2.3.%s" % o):
            n_exh += 1
            if bool(regexes["ipv4"].search(s)) != checker.conforms(s, "ipv4"):
                bad += 1
                print("FAIL ipv4 regex and checker disagree on %r" % s)
    print("exhaustive date and ipv4 comparisons with the checker: %d" % n_exh)
    print("%d pattern samples, %d format samples (%s): %d failures"
          % (n["pattern"], n["format"], ", ".join("%s %d" % kv for kv in sorted(per_format.items())), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
