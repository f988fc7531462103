#!/usr/bin/env bash
# test_layering.sh — the backend boundary: only src/backend/cpu/ knows the CPU backend's internals.
# Outside it, no file under src/ includes a backend/cpu/ header or calls a cpu_ function, and
# runtime/ includes no backend header but backend/backend.h (backends are reached through its
# vtable and backend_create). tests/ is outside the rule (white-box tests use cpu internals).
# grammar/ sits above text/: no lower layer includes a grammar/ header (the sampler reaches a
# constraint through the mask hook of text/sampler.h).
# The folders of src/ are layers, in the order of docs/architecture.md's "Layers" table (bottom up,
# read from there: one place): no file includes a header of a folder below its own in the table,
# and tools/ includes no library header but the public ones (include/) and base/'s (the allocator
# hook, the growable buffer). The check runs first on a throwaway tree with one upward include,
# which it must report.
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
# layers: the src/ folders of the table, bottom up; upward_includes ROOT prints every include of a
# folder below the including file's own (and of an unknown folder)
layers() { grep -oE '^\| `src/[a-z_]+/`' "$1/docs/architecture.md" | sed -E 's/^\| `src\/([a-z_]+)\/`/\1/'; }
upward_includes() {
    local r=$1 order
    order=$(layers "$r" | tr '\n' ' ')
    [ -n "$order" ] || { echo "no layer table in $r/docs/architecture.md"; return; }
    (cd "$r" && find src tools -type f \( -name '*.c' -o -name '*.h' \) | sort \
        | xargs grep -nE '^\s*#\s*include\s*"[a-z_]+/' /dev/null) \
    | awk -v order="$order" '
        BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
        {
            split($0, p, ":"); file = p[1]; split(file, f, "/")
            inc = $0; sub(/^[^"]*"/, "", inc); sub(/\/.*/, "", inc)
            if (f[1] == "tools") { if (inc != "base") print $0 "  (tools/ includes only the public headers and base/)"; next }
            own = f[2]
            if (!(own in rank)) { print $0 "  (src/" own "/ is not in the layer table)"; next }
            if (!(inc in rank)) { print $0 "  (" inc "/ is not a layer of the table)"; next }
            if (rank[inc] > rank[own]) print $0 "  (" own "/ sits below " inc "/)"
        }'
}
tmp=$(mktemp -d)
mkdir -p "$tmp/docs" "$tmp/src/base" "$tmp/src/model" "$tmp/tools/cli"
printf '| `src/base/` | a |\n| `src/model/` | b |\n' > "$tmp/docs/architecture.md"
printf '#include "base/alloc.h"\n' > "$tmp/src/model/m.c"
printf '#include <stdio.h>\n#include "model/model.h"\n' > "$tmp/src/base/b.c"
printf '#include "statelm.h"\n#include "base/buf.h"\n' > "$tmp/tools/cli/c.c"
self=$(upward_includes "$tmp")
rm -rf "$tmp"
if [ "$(echo "$self" | grep -c .)" != 1 ] || ! echo "$self" | grep -q 'src/base/b.c:2:.*base/ sits below model/'; then
    echo "self-check: the layer check of a tree with one upward include (base -> model) reported:"; echo "$self"; fail=1
fi
out=$(upward_includes "$root")
if [ -n "$out" ]; then echo "includes that run up the layers of docs/architecture.md:"; echo "$out"; fail=1; fi
exit $fail
