#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The shell blocks of README.md and docs/*.md run, or at least parse, as written.

    docs_run.py REMORA SOURCE_DIR

A fenced block whose info string is `sh run` is executed (bash -e, one block a
process) in a fresh folder holding links to the source tree's configs/, data/,
examples/ and tools/, with `remora` on PATH; it must exit 0. Training there is
short: every `remora train` line gets `--set train.steps=N` (N from the variable
REMORA_DOC_STEPS, default 3; a `train.steps=` the line sets is replaced), so a
block documents the real run and the test runs a few steps of it.

Every other `sh` / `bash` block (one that needs a GPU, several machines, a
corpus that is not bundled, or minutes) is checked without running: on each
line that calls remora, the command must exist, each --option must be one its
--help lists, each `--set key=value` key must be a key of `remora config --keys`
(a section of a model type or task counts), and each configs/*.json it names
must exist.

A ```text block whose first line is `$ remora ...` shows that command's output:
the command runs (in such a folder) and the block's other lines must be lines of
its output, in order; a line `...` stands for any number of lines. So what the
docs quote of `remora info` and the like is what the program prints.

Prints each failure and exits 1; 0 when every block passes.
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

FENCE = re.compile(r'^```(sh|bash)([^\n]*)\n(.*?)^```', re.M | re.S)
OUTPUT = re.compile(r'^```text\n\$ (remora [^\n]*)\n(.*?)^```', re.M | re.S)
REMORA = re.compile(r'(?:^|[\s;&|(])(?:\S*/)?remora(?=\s)')


def doc_files(source):
    return [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))


def blocks(source):
    """(file, line, run?, text) of every shell block."""
    for f in doc_files(source):
        text = open(f, encoding="utf-8").read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            yield os.path.relpath(f, source), line, m.group(2).split() == ["run"], m.group(3)


def output_blocks(source):
    """(file, line, command, shown lines) of every block that shows a command's output."""
    for f in doc_files(source):
        text = open(f, encoding="utf-8").read()
        for m in OUTPUT.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            yield os.path.relpath(f, source), line, m.group(1), m.group(2).splitlines()


def output_mismatch(shown, printed):
    """None when the shown lines are lines of the output in order (`...`: any lines
    between), else the first shown line that is not there."""
    at, skipping = 0, False
    for want in shown:
        if want == "...":
            skipping = True
            continue
        if skipping:
            while at < len(printed) and printed[at] != want:
                at += 1
        if at >= len(printed) or printed[at] != want:
            return want
        at, skipping = at + 1, False
    return None


def help_text(remora, *args):
    r = subprocess.run([remora, *args, "--help"], capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def known_options(remora):
    commands = help_text(remora).split("commands:", 1)[1].split("\n\n", 1)[0]
    out = {}
    for c in [line.split()[0] for line in commands.strip().splitlines() if line.strip()]:
        out[c] = {m.group(1) for m in re.finditer(r'^\s+(?:-\w,)?--([a-z][a-z0-9-]*)', help_text(remora, c), re.M)}
    return out


def known_keys(remora):
    """Every documented key as "section.key" (sections of a type or task merged)."""
    text = subprocess.run([remora, "config", "--keys"], capture_output=True, text=True, timeout=60).stdout
    keys, section = set(), ""
    for line in text.splitlines():
        m = re.match(r'^## (\S+)', line)
        if m:
            section = "" if m.group(1) == "the" else m.group(1)
            continue
        m = re.match(r'^\| `([^`]+)` \|', line)
        if m:
            keys.add(f"{section}.{m.group(1)}" if section else m.group(1))
    return keys


def remora_calls(text, commands):
    """The argument lists of the remora calls in a block (continuation lines
    joined): a command's first word (after VAR=value assignments), or a later
    word (a container's program, `mpirun ... remora`) followed by a command."""
    joined = re.sub(r'\\\n', ' ', text)
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not REMORA.search(line):
            continue
        for part in re.split(r'&&|\|\||;|\|', line):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            while words and re.match(r'^[A-Za-z_][A-Za-z0-9_]*=', words[0]):
                words = words[1:]
            for i, w in enumerate(words):
                if w == "remora" or w.endswith("/remora"):
                    rest = words[i + 1:]
                    if i == 0 or (rest and (rest[0] in commands or rest[0].startswith("--"))):
                        yield rest
                        break


def check_block(text, options, keys, source):
    problems = []
    for args in remora_calls(text, options):
        if not args or args[0].startswith("-"):
            continue
        command = args[0]
        if command not in options:
            problems.append(f"`remora {command}`: no such command")
            continue
        for i, a in enumerate(args[1:], 1):
            if a.startswith("--"):
                name = a[2:].split("=", 1)[0]
                if name not in options[command]:
                    problems.append(f"`remora {command} --{name}`: not an option of {command} --help")
                if name == "set" and i + 1 < len(args):
                    key = args[i + 1].split("=", 1)[0]
                    if key not in keys:
                        problems.append(f"`--set {key}`: not a key of `remora config --keys`")
            elif a.startswith("configs/") and a.endswith(".json") and not os.path.exists(os.path.join(source, a)):
                problems.append(f"{a}: no such config")
    return problems


def shortened(text, steps):
    """The block with every `remora train` line set to train `steps` steps."""
    out = []
    for line in re.sub(r'\\\n', ' ', text).splitlines():
        if re.search(r'(?:^|\s)(?:\S*/)?remora\s+train\s', line):
            code, _, comment = line.partition(" #")
            code = re.sub(r'--set\s+train\.steps=\S+', '', code).rstrip()
            line = f"{code} --set train.steps={steps}"
        out.append(line)
    return "\n".join(out) + "\n"


def run_block(text, remora, source, steps):
    with tempfile.TemporaryDirectory(prefix="remora_docs_run_") as work:
        for d in ("configs", "data", "examples", "tests", "tools"):
            os.symlink(os.path.join(source, d), os.path.join(work, d))
        bin_dir = os.path.join(work, ".bin")
        os.mkdir(bin_dir)
        os.symlink(os.path.abspath(remora), os.path.join(bin_dir, "remora"))
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        r = subprocess.run(["bash", "-e", "-c", shortened(text, steps)], cwd=work, env=env,
                           capture_output=True, text=True, timeout=600)
        return r.returncode, r.stdout + r.stderr


def main():
    remora, source = sys.argv[1], os.path.abspath(sys.argv[2])
    steps = int(os.environ.get("REMORA_DOC_STEPS", "3"))
    options, keys = known_options(remora), known_keys(remora)
    failed = ran = checked = 0
    for f, line, run, text in blocks(source):
        problems = check_block(text, options, keys, source)
        checked += 1
        if run and not problems:
            ran += 1
            rc, out = run_block(text, remora, source, steps)
            if rc != 0:
                problems.append(f"exited {rc}:\n{out[-3000:]}")
        for p in problems:
            print(f"{f}:{line}: {p}")
        failed += bool(problems)
    shown = 0
    for f, line, command, lines in output_blocks(source):
        shown += 1
        problems = check_block(command, options, keys, source)
        if not problems:
            rc, out = run_block(command + " 2>&1", remora, source, steps)
            if rc != 0:
                problems.append(f"`{command}` exited {rc}:\n{out[-3000:]}")
            elif (missing := output_mismatch(lines, out.splitlines())) is not None:
                problems.append(f"`{command}` does not print this line (or not in this order): {missing}\n"
                                f"it printed:\n{out[-3000:]}")
        for p in problems:
            print(f"{f}:{line}: {p}")
        failed += bool(problems)
    print(f"docs_run: {checked} shell blocks checked, {ran} run, {shown} outputs compared, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
