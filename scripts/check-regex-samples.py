#!/usr/bin/env python3
"""Random strings derived by the regex grammars, checked with Python (not a CI test).

Runs `test_regex` with SLM_REGEX_SAMPLES=FILE: for every supported pattern of
tests/data/grammar/regex/vectors.json and every format of gr_format_regex, the C side random-walks
the compiled grammar through the engine's matcher and writes the strings it derives (as JSON string
literals). Each must be valid JSON whose decoded value the pattern matches (Python `re.search`,
the pattern translated as in gen-regex-vectors.py) or that python-jsonschema's FormatChecker
accepts for the format (draft 2020-12's checker; install `jsonschema[format]`: rfc3339-validator, fqdn, rfc3987,
isoduration). Prints the counts; exits 1 on any failure.

usage: check-regex-samples.py BUILD/tests/test_regex
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
gen = __import__("gen-regex-vectors")

import jsonschema  # noqa: E402


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
    for line in lines:
        rec = json.loads(line)
        for s in rec["s"]:
            if "p" in rec:
                n["pattern"] += 1
                py, _ = gen.to_python(rec["p"])
                if not re.search(py, s):
                    bad += 1
                    print("FAIL /%s/ derives %r" % (rec["p"], s))
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
    print("%d pattern samples, %d format samples (%s): %d failures"
          % (n["pattern"], n["format"], ", ".join("%s %d" % kv for kv in sorted(per_format.items())), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
