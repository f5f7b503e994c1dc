#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""docs/driver.md's option tables are the program's own option definitions.

    docs_cli.py REMORA SOURCE_DIR            # check: exit 1 where they differ
    docs_cli.py REMORA SOURCE_DIR --write    # rewrite the tables from the program

The page's first block is `remora --help`'s usage lines. For every command
`remora --help` lists, driver.md must have a section
`## COMMAND` whose option table (rows `| `--option ARG` | meaning |`) is the one
`remora COMMAND --help` gives: every option it takes, in its order, with its
help text (option names in it set as code), and no other. The options every
config-reading command takes (`--set`, `--help`) are documented once, in the
section "Options every config-reading command takes". Prints each difference
and exits 1; 0 when they agree.
"""
import os
import re
import subprocess
import sys

OPTION = re.compile(r'(?<![\w-])--([a-z][a-z0-9-]*)')
SHARED = {"help", "set"}  # documented once for every command


def help_text(remora, *args):
    r = subprocess.run([remora, *args, "--help"], capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def commands(remora):
    text = help_text(remora)
    block = text.split("commands:", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.strip().splitlines() if line.strip()]


def options_of(remora, command):
    text = help_text(remora, command)
    opts = set()
    for line in text.splitlines():
        m = re.match(r'^\s+(?:-\w,)?--([a-z][a-z0-9-]*)', line)
        if m:
            opts.add(m.group(1))
    return opts - SHARED


HELP_ROW = re.compile(r'^\s+(?:-\w,)?--([a-z][a-z0-9-]*)((?: [^\s]+)*?)\s{2,}(\S.*)$')


def table_rows(remora, command):
    """The option table of `remora COMMAND --help`, as driver.md writes it."""
    rows = []
    for line in help_text(remora, command).splitlines():
        m = HELP_ROW.match(line)
        if not m or m.group(1) in SHARED:
            continue
        meaning = re.sub(r'(?<![\w`-])(--[a-z][a-z0-9-]*)', r'`\1`', m.group(3).strip())
        cells = (f"`--{m.group(1)}{m.group(2)}`", meaning)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")  # a | in a cell is \|
    return rows


def sections(doc):
    out, name, fenced = {}, None, False
    for line in doc.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            name = line[3:].strip().strip("`")
            out[name] = ""
            continue
        if name is not None:
            out[name] += line + "\n"
    return out


def usage_lines(remora):
    """The `usage:` lines of `remora --help`, one per command."""
    block = help_text(remora).split("usage:", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.strip().splitlines()]


def main():
    remora, root = sys.argv[1], sys.argv[2]
    write = sys.argv[3:] == ["--write"]
    path = f"{root}/docs/driver.md"
    doc = open(path, encoding="utf-8").read()
    problems, n = [], 0
    # The page's first block is `remora --help`'s usage, line for line.
    first = re.search(r"^```\n(remora .*?)^```", doc, re.M | re.S)
    usage = usage_lines(remora)
    if not first:
        problems.append("driver.md: no usage block (a ``` block of `remora ...` lines) at the top")
    elif first.group(1).splitlines() != usage:
        if write:
            doc = doc[:first.start(1)] + "\n".join(usage) + "\n" + doc[first.end(1):]
        else:
            problems.append("driver.md: the usage block differs from `remora --help`'s usage lines")
    secs = sections(doc)
    for cmd in commands(remora):
        n += 1
        if cmd not in secs:
            problems.append(f"driver.md has no section '## {cmd}' for the command {cmd}")
            continue
        want = table_rows(remora, cmd)
        have = [line for line in secs[cmd].splitlines() if line.startswith("| `-")]
        if have == want:
            continue
        if not have:
            problems.append(f"driver.md, section {cmd}: no option table (| option | meaning |)")
            continue
        if write:  # the section's rows, contiguous, become the program's
            block = "\n".join(have) + "\n"
            start = doc.index("## " + cmd)
            at = doc.index(block, start)
            doc = doc[:at] + "\n".join(want) + "\n" + doc[at + len(block):]
            continue
        for w in want:
            if w not in have:
                problems.append(f"driver.md, section {cmd}: expected the row  {w}")
        for h in have:
            if h not in want:
                problems.append(f"driver.md, section {cmd}: `remora {cmd} --help` gives no row  {h}")
        if not problems:
            problems.append(f"driver.md, section {cmd}: the rows are not in `remora {cmd} --help`'s order")
    if write:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(doc)
        os.replace(path + ".tmp", path)
    for p in problems:
        print(p)
    print(f"docs_cli: {n} commands compared with docs/driver.md, {len(problems)} differences"
          + ("; run tests/docs_cli.py REMORA . --write" if problems and not write else ""))
    return 1 if problems or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
