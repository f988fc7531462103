#!/usr/bin/env python3
"""Validates JSON documents against a JSON schema with the jsonschema library.

usage: validate_json.py SCHEMA FILE...   exit 0 when every file validates, 1 when one does not,
77 (CTest's skip code for the CLI tests) when the jsonschema library is not installed."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("SKIPPED: the Python jsonschema library is not installed (scripts/test.sh installs it)")
    sys.exit(77)

schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
bad = 0
for path in sys.argv[2:]:
    doc = json.load(open(path))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:5]:
        print(f"{path}: {'/'.join(str(p) for p in e.path)}: {e.message[:300]}")
    bad += bool(errors)
print(f"{len(sys.argv) - 2 - bad} of {len(sys.argv) - 2} documents valid")
sys.exit(1 if bad else 0)
