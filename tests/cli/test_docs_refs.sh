#!/usr/bin/env bash
# test_docs_refs.sh — the repository explains itself: no tracked file points outside it (the
# shared folder, DESIGN.md or STYLE.md of the workspace), every docs/ page a file cites
# (docs/NAME.md, docs/spec/NAME.md) exists, and every link and section citation lands on
# something that exists: Markdown links on their file and heading anchor, "docs/<page>.md §N.M" on a
# numbered heading, "docs/<page>.md, \"Title\"" on a heading or bold paragraph title
# (tests/cli/check_md_refs.py, standard-library Python: $SLM_PYTHON or python3).
# Arguments: the statelm binary (unused), tests/data.
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
# Links (files and heading anchors) and section citations resolve.
echo "$files" | "${SLM_PYTHON:-python3}" tests/cli/check_md_refs.py || fail=1
[ -f LICENSE ] || { echo "LICENSE is missing"; fail=1; }
exit $fail
