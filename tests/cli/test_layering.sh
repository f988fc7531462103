#!/usr/bin/env bash
# test_layering.sh — the backend boundary: only src/backend/cpu/ knows the CPU backend's internals.
# Outside it, no file under src/ includes a backend/cpu/ header or calls a cpu_ function, and
# runtime/ includes no backend header but backend/backend.h (backends are reached through its
# vtable and backend_create). tests/ is outside the rule (white-box tests use cpu internals).
# grammar/ sits above text/: no lower layer includes a grammar/ header (the sampler reaches a
# constraint through the mask hook of text/sampler.h).
# The library reads no environment variable (getenv, secure_getenv): the CLI does, in one place
# (tools/cli/common.c cli_apply_env), and passes what it read in as session and plan params.
# Arguments: the statelm binary (unused), tests/data (unused).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
files=$(find src -type f \( -name '*.c' -o -name '*.h' \) -not -path 'src/backend/cpu/*' | sort)
fail=0
out=$(echo "$files" | xargs grep -nE '^\s*#\s*include\s*[<"]backend/cpu/' 2>/dev/null)
if [ -n "$out" ]; then echo "backend/cpu headers included outside src/backend/cpu/:"; echo "$out"; fail=1; fi
# Calls and declarations (cpu_name followed by an opening parenthesis) in code, comments blanked
# line by line (// to the end, /* ... */, and the lines of a block comment).
out=$(for f in $files; do
          sed -E 's://.*$::; s:/\*.*\*/::g; s:/\*.*$::; s:^\s*\*(\s.*)?(/)?$::' "$f" \
              | grep -nP '(?<![A-Za-z0-9_])cpu_[A-Za-z0-9_]*\s*\(' | sed "s|^|$f:|"
      done)
if [ -n "$out" ]; then echo "cpu_ functions called or declared outside src/backend/cpu/:"; echo "$out"; fail=1; fi
out=$(find src/runtime -type f \( -name '*.c' -o -name '*.h' \) | xargs grep -nE '^\s*#\s*include\s*[<"]backend/' 2>/dev/null \
      | grep -vE '[<"]backend/backend\.h[>"]')
if [ -n "$out" ]; then echo "runtime/ includes a backend header other than backend/backend.h:"; echo "$out"; fail=1; fi
out=$(grep -rnE '^\s*#\s*include\s*[<"]grammar/' src/text/ src/base/ src/format/ src/model/ src/graph/ src/compile/ src/backend/ src/runtime/ 2>/dev/null)
if [ -n "$out" ]; then echo "a layer below grammar/ includes a grammar/ header (grammar/ sits above text/):"; echo "$out"; fail=1; fi
out=$(grep -rn getenv src/)
if [ -n "$out" ]; then echo "the library reads the environment (only tools/cli/ may):"; echo "$out"; fail=1; fi
out=$(grep -rln getenv tools/cli/ | grep -v '^tools/cli/common\.c$')
if [ -n "$out" ]; then echo "the CLI reads the environment outside tools/cli/common.c:"; echo "$out"; fail=1; fi
exit $fail
