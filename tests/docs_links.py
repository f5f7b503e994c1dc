#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every relative link of the documentation resolves: README.md, CHANGELOG.md and
docs/*.md, links [text](path) and [text](path#anchor) and bare (#anchor) ones.

    docs_links.py SOURCE_DIR

A path must name a file or folder of the repository, relative to the page that
links it; an anchor must be the GitHub slug of a heading of the page it names
(lower case, punctuation but - and _ dropped, spaces as -, -1, -2 ... for
repeats). Links to http(s) and mailto addresses are not fetched. Prints each
broken link (page:line -> target, why) and exits 1; 0 when all resolve.
"""
import os
import re
import sys

LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
IMAGE = re.compile(r'!\[[^\]]*\]\(([^)\s]+)\)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
FENCE = re.compile(r'^\s*(```|~~~)')


def slug(text):
    text = re.sub(r'`([^`]*)`', r'\1', text)            # code spans keep their text
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # links keep their text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def lines_outside_code(path):
    """(line number, text) of the lines outside fenced code blocks."""
    out, fenced = [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                out.append((n, line))
    return out


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, found = {}, set()
        for _, line in lines_outside_code(path):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else f"{s}-{k}")
        # Explicit HTML anchors: <a name="x"></a> or id="x".
        with open(path, encoding="utf-8") as f:
            for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', f.read()):
                found.add(m.group(1))
        _anchors[path] = found
    return _anchors[path]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    pages = [os.path.join(root, "README.md"), os.path.join(root, "CHANGELOG.md")]
    docs = os.path.join(root, "docs")
    pages += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    bad, checked = [], 0
    for page in pages:
        if not os.path.exists(page):
            continue
        rel_page = os.path.relpath(page, root)
        for n, line in lines_outside_code(page):
            line = re.sub(r'`[^`]*`', '', line)  # code spans are not links
            for m in list(LINK.finditer(line)) + list(IMAGE.finditer(line)):
                target = m.group(1)
                if re.match(r'^[a-z]+:', target):
                    continue  # http:, https:, mailto:
                checked += 1
                path, _, anchor = target.partition("#")
                dest = page if not path else os.path.normpath(os.path.join(os.path.dirname(page), path))
                if not os.path.exists(dest):
                    bad.append(f"{rel_page}:{n} -> {target}: {os.path.relpath(dest, root)} does not exist")
                    continue
                if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append(f"{rel_page}:{n} -> {target}: no heading '{anchor}' in {os.path.relpath(dest, root)}")
    for b in bad:
        print(b)
    print(f"docs_links: {checked} relative links in {len(pages)} pages, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
