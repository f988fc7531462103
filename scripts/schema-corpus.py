#!/usr/bin/env python3
"""JSON Schema coverage and exactness over JSONSchemaBench (github.com/guidance-ai/jsonschemabench,
data/<category>/*.json, one schema a file). Not run in CI: the data is not the repository's.

  schema-corpus.py compile [--build DIR] [--data DIR] [--no-llg]
      compiles every schema with statelm (bench_schema_compile: slm_grammar_from_json_schema, the
      conversion and the GBNF compilation) and with llguidance (LLMatcher.grammar_from_json_schema +
      validate_grammar); prints per category the schemas, what each accepts, the most frequent
      refusals (keyword and message, pointer removed) and compile time p50/p99/max (microseconds).
  schema-corpus.py serve [--n 30] [--temp 0] [--n-predict 400] [--model GGUF]
      serves n accepted schemas to a model (SmolLM2-135M-Instruct by default) with `statelm run
      --json-schema`, the schema in the prompt; every complete answer must validate.
  schema-corpus.py exact [--n 200] [--samples 20] [--seed 1]
      draws n schemas statelm accepts, samples random strings from each one's GBNF (random walks,
      scripts/gbnf_sample.py) and validates each with jsonschema (the draft the schema declares,
      2020-12 when none; formats checked: those statelm enforces, by jsonschema's checkers). Any
      invalid output is a bug in the converter: it is printed and the exit status is 1.

Needs a venv with jsonschema (with its format extras) and (for compile) llguidance: python3 -m venv V
&& V/bin/pip install 'jsonschema[format]' llguidance. The data: STATELM_CACHE/jsonschemabench/data (or --data)."""
import argparse
import collections
import datetime
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
CACHE = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm"))


def schema_paths(data):
    return sorted(p for p in Path(data).glob("*/*.json"))


def run_statelm(build, paths, strict=False):
    """{path: (status, microseconds, message)}"""
    cmd = [str(Path(build) / "bench_schema_compile")] + (["--strict"] if strict else [])
    out = subprocess.run(cmd, input="\n".join(map(str, paths)) + "\n", capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        path, st, us, msg = (line.split("\t") + [""])[:4]
        res[path] = (int(st), float(us), msg)
    return res


def run_llguidance(paths):
    import llguidance
    res = {}
    for p in paths:
        text = Path(p).read_text(errors="replace")
        t0 = time.perf_counter()
        try:
            g = llguidance.LLMatcher.grammar_from_json_schema(text)
            err = llguidance.LLMatcher.validate_grammar(g)
        except Exception as e:  # a schema it cannot even read
            err = str(e) or type(e).__name__
        res[str(p)] = (0 if not err else 1, (time.perf_counter() - t0) * 1e6, err)
    return res


def reason(msg):
    """A refusal without its JSON pointer and names, so equal causes count together."""
    m = re.sub(r" at (/\S*)", "", msg)
    m = re.sub(r"'[^']*' (?=is|at|of|beside|meets|cannot|together|has|needs)", "'…' ", m) if "keyword" not in m else m
    m = re.sub(r"\$ref '[^']*'", "$ref '…'", m)
    m = re.sub(r"property '[^']*'", "property '…'", m)
    m = re.sub(r"grammar \d+:\d+: ", "grammar: ", m)
    m = re.sub(r"rule '[^']*'", "rule '…'", m)
    return m[:110]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0


def cmd_compile(a):
    paths = schema_paths(a.data)
    st = run_statelm(a.build, paths)
    llg = {} if a.no_llg else run_llguidance(paths)
    cats = collections.defaultdict(list)
    for p in paths:
        cats[p.parent.name].append(str(p))
    print("| category | schemas | statelm accepts | llguidance accepts |\n|---|---:|---:|---:|")
    tot = [0, 0, 0]
    for cat in sorted(cats):
        ps = cats[cat]
        a1 = sum(st[p][0] == 0 for p in ps)
        a2 = sum(llg[p][0] == 0 for p in ps) if llg else 0
        tot = [tot[0] + len(ps), tot[1] + a1, tot[2] + a2]
        print(f"| {cat} | {len(ps):,} | {a1:,} | {a2:,} |")
    print(f"| **all** | **{tot[0]:,}** | **{tot[1]:,} ({100 * tot[1] / tot[0]:.1f}%)** | "
          f"**{tot[2]:,} ({100 * tot[2] / tot[0]:.1f}%)** |")
    both = sum(st[p][0] == 0 and llg.get(p, (1,))[0] == 0 for p in map(str, paths))
    only_llg = sum(st[p][0] != 0 and llg.get(p, (1,))[0] == 0 for p in map(str, paths))
    print(f"\naccepted by both: {both:,}; by llguidance only: {only_llg:,}; "
          f"by statelm only: {tot[1] - both:,}")
    for name, res in (("statelm", st), ("llguidance", llg)):
        if not res:
            continue
        us = [v[1] for v in res.values() if v[0] == 0]
        print(f"\n{name} compile time over accepted schemas: p50 {pct(us, .5):.0f} us, p99 {pct(us, .99):.0f} us, "
              f"max {max(us):.0f} us")
    print("\nstatelm refusals, most frequent first:")
    for msg, n in collections.Counter(reason(v[2]) for v in st.values() if v[0] != 0).most_common(a.top):
        print(f"  {n:5d}  {msg}")
    if llg:
        print("\nllguidance refusals, most frequent first:")
        for msg, n in collections.Counter(v[2][:110] for v in llg.values() if v[0] != 0).most_common(a.top):
            print(f"  {n:5d}  {msg}")


RFC3339_TIME = r"\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"


ENFORCED = ("date", "time", "date-time", "uuid", "duration", "email", "hostname", "ipv4", "ipv6", "uri",
            "uri-reference", "json-pointer")


def format_checker(jsonschema):
    """The formats statelm enforces, checked by jsonschema's own checkers (install jsonschema[format]
    for all of them; without rfc3339-validator, time and date-time are checked here)."""
    have = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers  # the global table holds draft 3's "time"
    fc = jsonschema.FormatChecker(formats=())
    fc.checkers = {f: have[f] for f in ENFORCED if f in have}
    missing = [f for f in ENFORCED if f not in have and f not in ("time", "date-time")]
    if missing:
        print(f"note: jsonschema cannot check formats {missing} here (pip install 'jsonschema[format]')")
    if "time" not in have:
        @fc.checks("time", raises=ValueError)
        def is_time(s):
            if isinstance(s, str):
                if not re.fullmatch(RFC3339_TIME, s):
                    raise ValueError("not RFC 3339 full-time")
                datetime.time.fromisoformat(s.replace("Z", "+00:00"))
            return True

    if "date-time" not in have:
        @fc.checks("date-time", raises=ValueError)
        def is_date_time(s):
            if isinstance(s, str):
                if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T" + RFC3339_TIME, s):
                    raise ValueError("not RFC 3339")
                datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
            return True

    return fc


def cmd_exact(a):
    import jsonschema
    from gbnf_sample import Sampler
    sys.setrecursionlimit(50000)
    paths = schema_paths(a.data)
    st = run_statelm(a.build, paths)
    ok = [p for p in map(str, paths) if st[p][0] == 0]
    rng = random.Random(a.seed)
    rng.shuffle(ok)
    fc = format_checker(jsonschema)
    bad = n = 0
    for p in ok[:a.n]:
        g = subprocess.run([str(Path(a.build) / "bench_schema_compile"), "--gbnf", p], capture_output=True,
                           text=True).stdout
        schema = json.loads(Path(p).read_text())
        v = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema, format_checker=fc)
        sm = Sampler(g, random.Random(a.seed))
        for _ in range(a.samples):
            text = sm.sample()
            n += 1
            try:
                errs = list(v.iter_errors(json.loads(text)))
            except ValueError as e:
                errs = [f"not JSON: {e}"]
            if errs:
                e = errs[0]
                where = list(getattr(e, "absolute_path", []))
                print(f"INVALID {p}: {getattr(e, 'message', e)[:200]} at {where}: {text[:300]!r}")
                bad += 1
                break
    print(f"{min(a.n, len(ok))} schemas, {n} samples, {bad} schemas with an invalid sample")
    return 1 if bad else 0


def cmd_serve(a):
    """Accepted schemas served to a model through `statelm run --json-schema` (greedy unless --temp),
    every complete answer validated."""
    import jsonschema
    paths = schema_paths(a.data)
    st = run_statelm(a.build, paths)
    ok = [p for p in map(str, paths) if st[p][0] == 0]
    rng = random.Random(a.seed)
    rng.shuffle(ok)
    fc = format_checker(jsonschema)
    model = a.model or str(CACHE / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    counts = collections.Counter()
    for p in ok[:a.n]:
        schema = json.loads(Path(p).read_text())
        prompt = "Reply with one JSON value for this schema and nothing else: " + json.dumps(schema)[:600]
        r = subprocess.run([str(Path(a.build) / "statelm"), "run", "-m", model, "-p", prompt, "--json-schema", p,
                            "--temp", str(a.temp), "--seed", str(a.seed), "-n", str(a.n_predict), "-t", "2"],
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            counts["error"] += 1
            print(f"ERROR {p}: {r.stderr.strip()[-300:]}")
            continue
        if "incomplete" in r.stderr:
            counts["cut"] += 1
            continue
        v = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema, format_checker=fc)
        try:
            errs = list(v.iter_errors(json.loads(r.stdout)))
        except ValueError as e:
            errs = [f"not JSON: {e}"]
        if errs:
            counts["invalid"] += 1
            print(f"INVALID {p}: {getattr(errs[0], 'message', errs[0])[:200]}: {r.stdout[:300]!r}")
        else:
            counts["valid"] += 1
    print(f"{min(a.n, len(ok))} schemas on {Path(model).name}, temperature {a.temp}, -n {a.n_predict}: "
          f"{counts['valid']} valid, {counts['invalid']} invalid, {counts['cut']} cut by -n, {counts['error']} errors")
    return 1 if counts["invalid"] or counts["error"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["compile", "exact", "serve"])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--data", default=str(CACHE / "jsonschemabench/data"))
    ap.add_argument("--no-llg", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="")
    ap.add_argument("--temp", type=float, default=0)
    ap.add_argument("--n-predict", type=int, default=400)
    a = ap.parse_args()
    if not Path(a.data).is_dir():
        print(f"SKIPPED: no corpus at {a.data}")
        return 77
    return {"compile": cmd_compile, "exact": cmd_exact, "serve": cmd_serve}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main() or 0)
