#!/usr/bin/env python3
"""The JSON Schema converter is exact without a model: for every schema of tests/data/grammar/schemas
and for generated schemas over the number keywords (random minimum/maximum/exclusive bounds in
draft 4's boolean and later numeric forms, multipleOf), strings drawn by random walks over the GBNF
that slm_json_schema_to_gbnf returns (scripts/gbnf_sample.py) must be JSON that the jsonschema
package validates (the draft the schema declares, 2020-12 when none; formats: date, time,
date-time, email, ipv4, ipv6, uuid). Loads libstatelm.so next to STATELM through ctypes; SKIPPED (77) when it is absent or the
build is sanitized (the interpreter would need the sanitizer runtimes preloaded).
Usage: test_schema_exact.py STATELM TESTS_DATA_DIR."""
import ctypes
import datetime
import json
import random
import re
import sys
from pathlib import Path

import jsonschema

statelm, data = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(data.resolve().parent.parent / "scripts"))
from gbnf_sample import Sampler  # noqa: E402

sys.setrecursionlimit(20000)
lib_path = statelm.parent / "libstatelm.so"
if not lib_path.exists():
    print(f"SKIPPED: {lib_path} is absent (the shared library target)")
    sys.exit(77)
if any(tag in statelm.read_bytes() for tag in (b"__asan_init", b"__tsan_init")):
    print("SKIPPED: sanitized build")
    sys.exit(77)
lib = ctypes.CDLL(str(lib_path))
lib.slm_json_schema_to_gbnf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]


def gbnf(schema_text):
    """(GBNF, None) or (None, refusal)."""
    raw = schema_text.encode()
    n, err = ctypes.c_size_t(0), ctypes.create_string_buffer(512)
    lib.slm_json_schema_to_gbnf(raw, len(raw), None, 0, ctypes.byref(n), err, 512)
    if n.value == 0:
        return None, err.value.decode()
    out = ctypes.create_string_buffer(n.value + 1)
    st = lib.slm_json_schema_to_gbnf(raw, len(raw), out, n.value + 1, ctypes.byref(n), err, 512)
    assert st == 0, err.value
    return out.value.decode(), None


RFC3339_TIME = r"\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"
checker = jsonschema.FormatChecker(formats=["date", "uuid", "email", "ipv4", "ipv6"])


@checker.checks("time", raises=ValueError)
def is_time(s):
    if isinstance(s, str):
        if not re.fullmatch(RFC3339_TIME, s):
            raise ValueError("not RFC 3339 full-time")
        datetime.time.fromisoformat(s.replace("Z", "+00:00"))
    return True


@checker.checks("date-time", raises=ValueError)
def is_date_time(s):
    if isinstance(s, str):
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T" + RFC3339_TIME, s):
            raise ValueError("not RFC 3339")
        datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return True


failures = []


def check_schema(name, schema, samples, seed):
    text, refusal = gbnf(json.dumps(schema))
    if text is None:
        return refusal
    v = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(
        schema, format_checker=checker)
    sm = Sampler(text, random.Random(seed))
    for _ in range(samples):
        out = sm.sample()
        try:
            errs = list(v.iter_errors(json.loads(out)))
        except ValueError as e:
            errs = [f"not JSON: {e}"]
        if errs:
            failures.append(f"{name}: {getattr(errs[0], 'message', errs[0])}: {out[:200]!r}")
            print("FAIL:", failures[-1], flush=True)
            return None
    return None


n_files = 0
for path in sorted((data / "grammar/schemas").glob("*.json")):
    refusal = check_schema(path.name, json.loads(path.read_text()), 200, 1)
    if refusal:
        failures.append(f"{path.name}: refused: {refusal}")
        print("FAIL:", failures[-1], flush=True)
    n_files += 1

rng = random.Random(36)


def bound():
    k = rng.randrange(4)
    if k == 0:
        return rng.randint(-120, 120)
    if k == 1:
        return round(rng.uniform(-100, 100), rng.randint(0, 4))
    if k == 2:
        return rng.choice([0, 1, -1, 0.5, -0.5, 0.05, 10, 99.99, 1e-3, 1e6, 123456789012])
    return round(rng.uniform(-2, 2), 2)


n_num = n_refused = 0
for i in range(150):
    s = {"type": rng.choice(["integer", "number"])}
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if rng.random() < 0.4:
            s[key] = bound()
    if s["type"] == "integer" and rng.random() < 0.15:
        s["multipleOf"] = rng.choice([1, 2, 3, 7])
    if rng.random() < 0.2:
        s["$schema"] = "http://json-schema.org/draft-04/schema#"
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if key in s:
                s[key] = rng.random() < 0.5
    refusal = check_schema(f"numbers {json.dumps(s)}", s, 40, i)
    n_num += 1
    if refusal:  # bounds that allow nothing the grammar writes, or a strict bound past 15 digits
        n_refused += 1
        if not any(w in refusal for w in ("allow no", "multiples", "significant digits")):
            failures.append(f"numbers {json.dumps(s)}: unexpected refusal {refusal}")

print(f"{n_files} schema files x 200 samples, {n_num} number schemas x 40 samples ({n_refused} refused)")
if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("ok")
