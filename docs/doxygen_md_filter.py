#!/usr/bin/env python3
"""Doxygen input filter for README.md, CONTRIBUTING.md and docs/*.md (FILTER_PATTERNS in Doxyfile.in).

The Markdown pages are written to be read in the repository and on the Doxygen site. Two kinds of
link mean the same in both but are spelled differently for Doxygen 1.9, which this filter rewrites,
line by line (line numbers, and so warning locations, stay the same):

- a link to a labelled heading of another page, [text](page.md#label), which Doxygen 1.9 leaves as
  a dead href: it becomes [text](@ref label), which Doxygen resolves to the page and the heading
  (every label is declared with {#label} after the heading);
- a link from README.md (the main page, at the root of the HTML output) to a file of docs/ that is
  not a page, [text](docs/file.json): it becomes [text](file.json), the copy that HTML_EXTRA_FILES
  puts next to the pages.

Usage (by Doxygen): doxygen_md_filter.py FILE, the filtered text on standard output.
"""

import re
import sys

PAGE_ANCHOR = re.compile(r"\]\((?:docs/)?[A-Za-z0-9_.-]+\.md#([A-Za-z0-9_-]+)\)")
DOCS_FILE = re.compile(r"\]\(docs/([A-Za-z0-9_.-]+\.(?:json|png|svg))\)")


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    text = PAGE_ANCHOR.sub(r"](@ref \1)", text)
    text = DOCS_FILE.sub(r"](\1)", text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
