#!/usr/bin/env python3
"""Checks the HTML that Doxygen generated for the API reference (docs/CMakeLists.txt, test docs_html).

Usage: check_doxygen_html.py HTML_DIR

Reports, one line each, and exits 1 when there is any:
- a local href or src (a link, an image, a script, a style sheet) whose file does not exist in HTML_DIR;
- a local link with a #fragment whose target file has no element with that id (or <a name>);
- a heading (h1 to h6, and the page titles Doxygen writes as <div class="title">) whose text shows
  markup as text: a literal <tt>, <code> or any other escaped tag, or a backtick.
External links (http:, https:, mailto:, ...) are not followed. Python's standard library only.
"""

import html.parser
import os
import re
import sys
import urllib.parse

HEADING_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
LITERAL_MARKUP = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(\s[^<>]*)?/?>|`")


class Page(html.parser.HTMLParser):
    """Collects a page's ids, its local references and the text of its headings."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.refs = []  # (line, attribute, value)
        self.headings = []  # (line, text)
        self._heading_depth = 0
        self._heading_line = 0
        self._heading_text = []
        self._title_div_depth = 0
        self._div_depth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        line = self.getpos()[0]
        for key in ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) is not None:
                self.refs.append((line, key, attrs[key]))
        if tag == "div":
            self._div_depth += 1
        is_title = tag == "div" and "title" in (attrs.get("class") or "").split()
        if tag in HEADING_TAGS or is_title:
            if self._heading_depth == 0:
                self._heading_line = line
                self._heading_text = []
                if is_title:
                    self._title_div_depth = self._div_depth
            self._heading_depth += 1

    def handle_endtag(self, tag):
        closes_title = tag == "div" and self._title_div_depth and self._div_depth == self._title_div_depth
        if tag == "div":
            self._div_depth -= 1
        if self._heading_depth and (tag in HEADING_TAGS or closes_title):
            if closes_title:
                self._title_div_depth = 0
            self._heading_depth -= 1
            if self._heading_depth == 0:
                self.headings.append((self._heading_line, "".join(self._heading_text).strip()))

    def handle_data(self, data):
        if self._heading_depth:
            self._heading_text.append(data)


def parse(path, cache):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8", errors="replace") as f:
            page.feed(f.read())
        page.close()
        cache[path] = page
    return cache[path]


def check(html_dir):
    problems = []
    cache = {}
    pages = sorted(name for name in os.listdir(html_dir) if name.endswith(".html"))
    if not pages:
        return [f"{html_dir}: no HTML page (was the docs target built?)"], 0
    for name in pages:
        path = os.path.join(html_dir, name)
        page = parse(path, cache)
        for line, text in page.headings:
            if LITERAL_MARKUP.search(text):
                problems.append(f"{name}:{line}: heading shows markup as text: {text!r}")
        for line, attribute, value in page.refs:
            url = urllib.parse.urlsplit(value)
            if url.scheme or url.netloc or value.startswith("//"):
                continue  # external, or javascript:
            target = urllib.parse.unquote(url.path)
            target_path = os.path.normpath(os.path.join(html_dir, target)) if target else path
            if not os.path.isfile(target_path):
                problems.append(f"{name}:{line}: {attribute}=\"{value}\": no file {target or name}")
                continue
            if url.fragment and target_path.endswith(".html"):
                if url.fragment not in parse(target_path, cache).ids:
                    problems.append(f"{name}:{line}: {attribute}=\"{value}\": no id '{url.fragment}' "
                                    f"in {os.path.basename(target_path)}")
    return problems, len(pages)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    problems, count = check(sys.argv[1])
    for problem in problems:
        print(problem)
    print(f"{count} pages checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
