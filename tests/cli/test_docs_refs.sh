#!/usr/bin/env bash
# test_docs_refs.sh — the repository explains itself: no tracked file points outside it (the
# shared folder, DESIGN.md or STYLE.md of the workspace), and every docs/ page a file cites
# (docs/NAME.md, docs/spec/NAME.md) exists. Arguments: the statelm binary (unused), tests/data.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    files=$(git ls-files | grep -v '^tests/data/\|^tests/cli/test_docs_refs.sh$')
else
    files=$(find . -type f -not -path './build*' -not -path './.git/*' -not -path './tests/data/*' \
                 -not -name test_docs_refs.sh | sed 's|^\./||')
fi
fail=0
# Workspace references: ../shared/..., shared/spec, shared/field-reports, DESIGN.md, STYLE.md.
out=$(echo "$files" | xargs grep -nI -E '\.\./shared/|shared/(spec|field-reports)|(^|[^A-Za-z_/])(DESIGN|STYLE)\.md' 2>/dev/null)
if [ -n "$out" ]; then echo "references outside the repository:"; echo "$out"; fail=1; fi
# spec pages cited without docs/ in front (docs/ pages themselves link relatively, checked below).
out=$(echo "$files" | grep -v '^docs/' | xargs grep -nI -E '(^|[^A-Za-z0-9_./])spec/[A-Za-z0-9_*]+\.md' 2>/dev/null)
if [ -n "$out" ]; then echo "spec pages cited outside docs/:"; echo "$out"; fail=1; fi
# Every cited docs page exists (docs/ at the start of a path: other projects' docs folders, written
# as ggml/docs/..., are not ours).
for ref in $(echo "$files" | xargs grep -ohIP '(?<![/\w.-])docs/(spec/)?[\w-]+\.md' 2>/dev/null | sort -u); do
    if [ ! -f "$ref" ]; then echo "cited but missing: $ref"; echo "$files" | xargs grep -lF "$ref"; fail=1; fi
done
# Relative links between docs/ pages resolve.
for page in $(echo "$files" | grep '^docs/.*\.md$'); do
    for link in $(grep -oP '\]\(\K[^)#:]+\.md(?=[)#])' "$page"); do
        [ -f "$(dirname "$page")/$link" ] || { echo "$page links to missing $link"; fail=1; }
    done
done
[ -f LICENSE ] || { echo "LICENSE is missing"; fail=1; }
exit $fail
