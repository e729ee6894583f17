#!/usr/bin/env python3
"""book-links.py BOOK_DIR: every internal link of the rendered book leads somewhere.

Reads each page mdBook wrote (its own print, table-of-contents and 404 pages aside) and checks
each relative `href` and `src`: the file it names exists under BOOK_DIR, and the `#fragment`,
when there is one, is the `id` of an element of that file. Links with a scheme (https:,
mailto:) are not followed: the book is checked offline. Exits 1 listing every broken link.
"""
import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

SKIP = {"print.html", "toc.html", "404.html"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None and tag in ("a", "img", "link", "script"):
                self.links.append((tag, attrs[key]))


def parse(path, cache={}):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8") as f:
            page.feed(f.read())
        cache[path] = page
    return cache[path]


def main(book):
    broken = []
    for dirpath, _, files in os.walk(book):
        for name in files:
            if not name.endswith(".html") or name in SKIP and dirpath == book:
                continue
            page_path = os.path.join(dirpath, name)
            for tag, link in parse(page_path).links:
                parts = urlsplit(link)
                if parts.scheme or parts.netloc or link.startswith("//"):
                    continue
                target = page_path
                if parts.path:
                    target = os.path.normpath(os.path.join(dirpath, unquote(parts.path)))
                    if os.path.isdir(target):
                        target = os.path.join(target, "index.html")
                rel = os.path.relpath(page_path, book)
                if not os.path.isfile(target):
                    broken.append(f"{rel}: <{tag}> {link}: no such file")
                    continue
                if parts.fragment and target.endswith(".html"):
                    if unquote(parts.fragment) not in parse(target).ids:
                        broken.append(f"{rel}: <{tag}> {link}: no element with that id")
    for line in broken:
        print(f"book-links: {line}", file=sys.stderr)
    if broken:
        print(f"book-links: {len(broken)} broken internal links", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: book-links.py BOOK_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
