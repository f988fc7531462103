#!/usr/bin/env bash
# test_header_names.sh — the public headers' comments name what exists: every slm_ function or type
# a comment of include/*.h mentions is declared there, and one named as a function is a function
# (tests/cli/check_header_names.py, standard-library Python: $SLM_PYTHON or python3). The check
# runs first on a throwaway tree whose header names a missing function, calls a type and lists a
# type among functions, and must report all three.
# Arguments: the statelm binary (unused), tests/data (unused).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${SLM_PYTHON:-python3}
check="$root/tests/cli/check_header_names.py"
fail=0
tmp=$(mktemp -d)
mkdir -p "$tmp/include"
cat > "$tmp/include/a.h" <<'H'
/* a.h — slm_thing_get_stats and slm_thing_create(); slm_thing_stats(t) and slm_thing_gone. */
typedef struct slm_thing_stats { int n; } slm_thing_stats;
int slm_thing_create(void);
/* Threads: slm_thing_create, slm_thing_get_stats and slm_thing_stats may be called from any thread. */
void slm_thing_get_stats(slm_thing_stats *out);
H
self=$("$py" "$check" "$tmp")
rm -rf "$tmp"
for want in 'a.h:1: slm_thing_stats(...) is written as a call' 'a.h:1: slm_thing_gone is declared by no' \
            'a.h:4: slm_thing_stats is listed with functions'; do
    if ! grep -qF "$want" <<< "$self"; then echo "self-check: missed \"$want\"; reported:"; echo "$self"; fail=1; fi
done
if [ "$(grep -c . <<< "$self")" != 3 ]; then echo "self-check: expected 3 findings, got:"; echo "$self"; fail=1; fi
out=$("$py" "$check" "$root") || { echo "public header comments name what the headers do not declare:"; echo "$out"; fail=1; }
exit $fail
