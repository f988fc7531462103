#!/usr/bin/env python3
"""check_header_names.py ROOT — every slm_ name a public header's comments mention exists.

The public headers are ROOT/include/*.h. Their code (comments blanked) declares functions (a name
followed by an opening parenthesis) and types and fields (every other slm_ name). In their
comments, every lowercase slm_ name (a wildcard such as slm_session_* is not a name) must be
declared; a name written as a call, name(...), must be a function; and a list of names (joined
by commas, "and", "or" or "/") that holds a function holds functions only, so a type named where a
call is meant ("submit, cancel and slm_engine_stats may be called") is reported. Prints one line
per finding; exit status 1 when there is any. Standard library only."""
import re
import sys
from pathlib import Path

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
NAME = r"slm_[a-z0-9_]*[a-z0-9]"
MENTION = re.compile(r"(?<![\w*])(" + NAME + r")\b(?![*\w])(\s*\()?")
LIST = re.compile(r"(?<![\w*])" + NAME + r"(?:(?:,\s*|,?\s+and\s+|,?\s+or\s+|\s*/\s*)" + NAME + r")+")


def findings(root: Path) -> list[str]:
    funcs, names, comments = set(), set(), []
    for h in sorted((root / "include").glob("*.h")):
        text = h.read_text(encoding="utf-8")
        code = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        funcs |= set(re.findall(r"\b(" + NAME + r")\s*\(", code))
        names |= set(re.findall(r"\b(" + NAME + r")\b", code))
        rel = h.relative_to(root)
        comments += [(rel, text.count("\n", 0, m.start()) + 1, m.group(0)) for m in COMMENT.finditer(text)]
    out = []
    for rel, line0, c in comments:
        def where(pos: int) -> str:
            return f"{rel}:{line0 + c.count(chr(10), 0, pos)}"
        for m in MENTION.finditer(c):
            name, call = m.group(1), m.group(2)
            if name not in names:
                out.append(f"{where(m.start())}: {name} is declared by no public header")
            elif call and name not in funcs:
                out.append(f"{where(m.start())}: {name}(...) is written as a call but is not a function")
        for m in LIST.finditer(c):
            listed = re.findall(r"\b" + NAME + r"\b", m.group(0))
            if any(n in funcs for n in listed):
                out += [f"{where(m.start())}: {n} is listed with functions but is not one" for n in listed
                        if n in names and n not in funcs]
    return out


if __name__ == "__main__":
    problems = findings(Path(sys.argv[1]))
    print("\n".join(problems))
    sys.exit(1 if problems else 0)
