#!/usr/bin/env bash
# `statelm plan --json` and `statelm check --json` validate against the committed schema
# (src/compile/plan.schema.json) for every tiny model and target, with and without --simulate.
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
for arch in llama qwen3 lfm2 qwen35; do
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
done
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
