#!/usr/bin/env bash
# `statelm plan --json` and `statelm check --json` validate against the committed schema
# (src/compile/plan.schema.json) for every tiny model and target, with and without --simulate, and
# `plan --profile --json` (every node measured); bad input to --profile is one error line.
# Needs Python's jsonschema (scripts/test.sh installs it); exit 77 = skipped when it is missing.
set -u
slm=$1
data=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${SLM_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -c 'import jsonschema' 2>/dev/null || { echo "SKIPPED: no Python jsonschema for $py"; exit 77; }
fail=0
files=()
for arch in llama qwen3 lfm2 qwen35 gemma3; do
  for target in cpu cuda ane; do
    f=$tmp/$arch-$target-plan.json
    "$slm" plan -m "$data/tiny/$arch/$arch-q8_0.gguf" --target "$target" --json -c 128 > "$f"
    rc=$?
    [ $rc -eq 0 ] || { echo "FAIL: plan $arch $target exited $rc"; fail=1; }
    files+=("$f")
    f=$tmp/$arch-$target-check.json
    "$slm" check -m "$data/tiny/$arch/$arch-q8_0.gguf" --target "$target" --json -c 128 > "$f"
    files+=("$f")
  done
  f=$tmp/$arch-ane-sim.json
  "$slm" plan -m "$data/tiny/$arch/$arch-f32.gguf" --target ane --json -c 128 --simulate -n 16 > "$f" 2> "$tmp/sim.err"
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: plan --simulate $arch exited $rc: $(cat "$tmp/sim.err")"; fail=1; }
  grep -q '"simulation":{' "$f" || { echo "FAIL: $arch: no simulation in the JSON"; fail=1; }
  files+=("$f")
  # ane computes in f16: the device-precision run is there, and rounding every activation and
  # weight to f16 moves the logits (a run that rounded nothing would report 0)
  "$py" - "$f" "$arch" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))["simulation"].get("device_precision")
assert d, f"{sys.argv[2]}: no device_precision in the ane simulation"
assert d["compute_dtype"] == "f16" and d["n_steps"] == 16 and 0 <= d["greedy_agree"] <= 16, d
assert d["max_abs_logit_diff"] is not None and 0 < d["max_abs_logit_diff"] < 1, d
PY
done
# cpu computes in f32: no device-precision run
f=$tmp/llama-cpu-sim.json
"$slm" plan -m "$data/tiny/llama/llama-f32.gguf" --target cpu --json -c 128 --simulate -n 4 > "$f" 2> "$tmp/sim.err" ||
  { echo "FAIL: plan --target cpu --simulate exited $?: $(cat "$tmp/sim.err")"; fail=1; }
if grep -q device_precision "$f"; then echo "FAIL: cpu simulation reports a device-precision run"; fail=1; fi
files+=("$f")
# --profile: the plan a session runs, every node measured; validated like the rest
for arch in llama lfm2 qwen35; do
  f=$tmp/$arch-cpu-profile.json
  "$slm" plan -m "$data/tiny/$arch/$arch-q8_0.gguf" --json -c 64 --profile -p 8 -n 4 -r 2 > "$f" 2> "$tmp/prof.err"
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: plan --profile $arch exited $rc: $(cat "$tmp/prof.err")"; fail=1; }
  "$py" - "$f" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["profile"]["n_prompt"] == 8 and d["profile"]["n_decode"] == 4 and d["profile"]["reps"] == 2, d["profile"]
for fn in d["functions"]:
    assert fn["measured"]["calls"] == (4 if fn["name"] == "decode" else 2), fn["measured"]  # verify: once per rep
    assert all("measured" in n for n in fn["nodes"]), "a node without a measurement"
    share = sum(n["measured"]["share"] for n in fn["nodes"])
    assert abs(share - 1) < 1e-3, share
PY
  files+=("$f")
done
# bad input: one error line and a non-zero exit, no plan printed
expect_error() { # what, then the command
  local what=$1; shift
  if out=$("$@" 2> "$tmp/err"); then echo "FAIL: $what succeeded"; fail=1; return; fi
  [ -z "$out" ] || { echo "FAIL: $what printed a plan"; fail=1; }
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || { echo "FAIL: $what: not one error line: $(cat "$tmp/err")"; fail=1; }
}
printf 'GGUF\3\0\0\0' > "$tmp/truncated.gguf"
expect_error "profile of a truncated model" "$slm" plan -m "$tmp/truncated.gguf" --profile
expect_error "profile for the ane target" "$slm" plan -m "$data/tiny/lfm2/lfm2-q8_0.gguf" --target ane --profile -c 64 -p 8 -n 2
expect_error "profile past the context" "$slm" plan -m "$data/tiny/lfm2/lfm2-q8_0.gguf" --profile -c 16 -p 12 -n 8
expect_error "profile with -p TEXT" "$slm" plan -m "$data/tiny/lfm2/lfm2-q8_0.gguf" --profile -p hello
"$py" "$root/tests/cli/validate_json.py" "$root/src/compile/plan.schema.json" "${files[@]}" || fail=1
# the validator must be able to fail: a document with a wrong effect and a missing key
"$py" - "$tmp/lfm2-ane-plan.json" "$tmp/broken.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["findings"][0]["effect"] = "sometimes"
del d["states"][0]["allocated_shape"]
json.dump(d, open(sys.argv[2], "w"))
PY
if "$py" "$root/tests/cli/validate_json.py" "$root/src/compile/plan.schema.json" "$tmp/broken.json" > /dev/null; then
  echo "FAIL: a broken document validated"; fail=1
fi
[ $fail -eq 0 ] && echo "plan/check JSON: ${#files[@]} documents valid"
exit $fail
