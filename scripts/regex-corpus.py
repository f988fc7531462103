#!/usr/bin/env python3
"""How many of JSONSchemaBench's distinct `pattern` / `patternProperties` regexes the regex compiler
(src/grammar/regex.c) accepts, and why it refuses the others (not a CI test: the data is not the
repository's; scripts/fetch-models.sh does not fetch it).

usage: regex-corpus.py BUILD/tests/test_regex [JSONSCHEMABENCH/data]
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
gen = __import__("gen-regex-vectors")


def main():
    exe = sys.argv[1]
    cache = os.environ.get("STATELM_CACHE", os.path.expanduser("~/.cache/statelm"))
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.join(cache, "jsonschemabench", "data")
    if not os.path.isdir(data):
        print("SKIPPED: no JSONSchemaBench data at %s" % data)
        sys.exit(77)
    pats = gen.bench_patterns(data)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(pats, f)
    try:
        out = subprocess.run([exe], env=dict(os.environ, SLM_REGEX_CORPUS=f.name), check=True,
                             capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    recs = [json.loads(l) for l in out.split("\n") if l]
    ok = sum(r["status"] == 0 for r in recs)
    reasons = collections.Counter()
    examples = {}
    for r in recs:
        if r["status"]:
            # "regex at offset N: what" -> what, without the details after '(' or a quoted construct
            why = re.sub(r"^regex at offset \d+: ", "", r["msg"])
            why = re.sub(r"\\[A-Za-z]", "\\\\X", why) if why.startswith("escape") else why
            why = re.sub(r" \(.*\)$", "", why)
            reasons[why] += 1
            examples.setdefault(why, r["p"])
    print("%d distinct patterns, %d compile (%.1f%%), %d refused" % (len(recs), ok, 100.0 * ok / len(recs),
                                                                     len(recs) - ok))
    for why, k in reasons.most_common():
        print("  %5d  %s   e.g. %s" % (k, why, json.dumps(examples[why])[:100]))


if __name__ == "__main__":
    main()
