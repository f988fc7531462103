"""check_md_refs.py — the repository's links and section citations resolve (run by test_docs_refs.sh).

Reads the repository's file list (paths relative to the repository root, one a line) on stdin and
checks, printing one line per broken reference and exiting 1 if there is any:
  - every Markdown link in a tracked .md page ([text](target), [text]: target), outside code
    spans and fenced blocks, that is not a URL: the file or folder it names exists, and an anchor
    (page.md#anchor, or #anchor within the page) is the slug of a heading of that page;
  - every section citation "docs/<page>.md §N.M" in any file, and in docs/ pages "<path>.md §N" (a path
    relative to the page) or a bare "§N" (the page itself): the page exists and has a heading
    numbered N.M ("## 4. ..." or "### 4.2 ...");
  - every citation of a section by its title, "docs/<page>.md, \"Title\"": the page has a heading with
    that text, or a paragraph that opens with it in bold ("**Title.**").
Heading slugs follow GitHub's rule: the heading's text as rendered (link targets, code backticks
and HTML tags dropped), lower-cased, every character that is not a letter, digit, mark, '_', '-'
or space dropped, each space turned into '-'; a repeated slug gets -1, -2, ... in page order.
Standard library only."""
import os
import re
import sys
import unicodedata

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^()\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
SECTION_NUM = re.compile(r"^(\d+(?:\.\d+)*)\.?(?:\s|$)")
# "docs/spec/gguf.md §7", "docs/spec/qwen35.md, §4.2", "docs/spec/gemma3.md §2–§4": page, then the
# run of § numbers that follows it.
DOCS_PAGE = r"(?<![\w./-])(docs/(?:spec/)?[\w-]+\.md)"
SECTIONS = r",?\s*((?:§\s?\d+(?:\.\d+)*[\s,–-]*)+)"
CITE = re.compile(DOCS_PAGE + SECTIONS)
SIBLING_CITE = re.compile(r"(?<![\w./-])((?:\.\./|[\w-]+/)*[\w-]+\.md)" + SECTIONS)
SECTION = re.compile(r"§\s?(\d+(?:\.\d+)*)")
TITLE_CITE = re.compile(DOCS_PAGE + r",\s*\"([^\"]+)\"")
BOLD_LEAD = re.compile(r"^\s*(?:[-*]\s+)?\*\*([^*]+?)\.?\*\*")


def slug(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if cat[0] in "LMN" or cat == "Pc" or ch in " -":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def prose_lines(lines):
    """(line number, text) of the lines outside fenced code blocks."""
    fenced = None
    for i, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
            elif m.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            yield i, line


class Page:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.anchors, self.sections, self.titles, seen = set(), set(), set(), {}
        for _, line in prose_lines(self.lines):
            m = BOLD_LEAD.match(line)
            if m:
                self.titles.add(m.group(1))
            m = HEADING.match(line)
            if not m:
                continue
            self.titles.add(m.group(2))
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            self.anchors.add(s if n == 0 else f"{s}-{n}")
            num = SECTION_NUM.match(m.group(2))
            if num:
                self.sections.add(num.group(1))


def main():
    root = os.getcwd()
    files = [f for f in sys.stdin.read().split("\n") if f]
    pages = {}

    def page(path):
        path = os.path.normpath(path)
        if path not in pages:
            pages[path] = Page(os.path.join(root, path)) if os.path.isfile(os.path.join(root, path)) else None
        return pages[path]

    bad = []
    for f in files:
        if not f.endswith(".md"):
            continue
        here = os.path.dirname(f)
        for no, line in prose_lines(page(f).lines):
            text = CODE_SPAN.sub("", line)
            targets = [m.group(2) for m in INLINE_LINK.finditer(text)]
            m = REF_DEF.match(text)
            if m:
                targets.append(m.group(1))
            for t in targets:
                if not t or URL.match(t):
                    continue
                path, _, anchor = t.partition("#")
                dest = os.path.normpath(os.path.join(here, path)) if path else f
                if path and not os.path.exists(os.path.join(root, dest)):
                    bad.append(f"{f}:{no}: link to missing {path}")
                elif anchor and dest.endswith(".md") and anchor not in page(dest).anchors:
                    bad.append(f"{f}:{no}: link to {t}: {dest} has no heading with anchor #{anchor}")

    def cite(f, no, dest, nums, missing_ok=False):
        p = page(dest)
        if p is None:
            if not missing_ok:
                bad.append(f"{f}:{no}: cites {os.path.normpath(dest)}, which does not exist")
            return
        for num in SECTION.findall(nums):
            if num not in p.sections:
                bad.append(f"{f}:{no}: {dest} §{num}: no heading numbered {num} in {dest}")

    for f in files:
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                lines = fh.read().split("\n")
        except (UnicodeDecodeError, OSError):
            continue
        in_docs = f.startswith("docs/") and f.endswith(".md")
        for no, line in enumerate(lines, 1):
            for m in TITLE_CITE.finditer(line):
                p = page(m.group(1))
                if p is not None and m.group(2) not in p.titles:
                    bad.append(f"{f}:{no}: {m.group(1)}, \"{m.group(2)}\": no heading or bold paragraph title "
                               f"\"{m.group(2)}\" in {m.group(1)}")
            if "§" not in line:
                continue
            for m in CITE.finditer(line):
                cite(f, no, m.group(1), m.group(2), missing_ok=True)  # test_docs_refs.sh reports those
            if in_docs:
                rest = CITE.sub("", line)
                for m in SIBLING_CITE.finditer(rest):
                    cite(f, no, os.path.join(os.path.dirname(f), m.group(1)), m.group(2))
                rest = SIBLING_CITE.sub("", rest)
                for m in SECTION.finditer(rest):
                    cite(f, no, f, m.group(0))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
