#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""docs/driver.md and the program agree on the commands and their options.

    docs_cli.py REMORA SOURCE_DIR

For every command `remora --help` lists, driver.md must have a section
`## COMMAND` whose option table (rows `| `--option ...` | meaning |`) lists
every option of `remora COMMAND --help`, and no option the command does not
take. The
options every config-reading command takes (`--set`) are documented once, in
the section "Options every config-reading command takes". Prints each
difference and exits 1; 0 when they agree.
"""
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


def main():
    remora, root = sys.argv[1], sys.argv[2]
    doc = open(f"{root}/docs/driver.md", encoding="utf-8").read()
    secs = sections(doc)
    problems, n = [], 0
    for cmd in commands(remora):
        n += 1
        if cmd not in secs:
            problems.append(f"driver.md has no section '## {cmd}' for the command {cmd}")
            continue
        have = options_of(remora, cmd)
        rows = [line for line in secs[cmd].splitlines() if line.startswith("| `-")]
        documented = {m for row in rows for m in OPTION.findall(row.split("|")[1])} - SHARED
        for o in sorted(have - documented):
            problems.append(f"driver.md, section {cmd}: the option --{o} of `remora {cmd}` is not documented")
        for o in sorted(documented - have):
            problems.append(f"driver.md, section {cmd}: --{o} is documented but `remora {cmd}` has no such option")
    for p in problems:
        print(p)
    print(f"docs_cli: {n} commands compared with docs/driver.md, {len(problems)} differences")
    return 1 if problems or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
