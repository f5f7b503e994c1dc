#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Crash states of a run directory, from a recorded trace of its file-system calls.

    power_cut.py TRACE RUN_DIR BEFORE AFTER OUT_PARENT [--max-subsets N] [--per-combination M]

TRACE is `strace -f -y` output of a `remora train --resume` that ran in
RUN_DIR (only calls on its files count); BEFORE and AFTER are copies of
RUN_DIR before and after that run. The script replays the
calls as a power cut would leave them, after ALICE (Pillai et al., OSDI 2014):
at every crash point (after each call), every call not yet made durable may be
lost, in any subset (all subsets up to --max-subsets, else every prefix, every
single loss and seeded random subsets). A write is durable once its file was
fsynced; a name created, renamed or removed once its directory was fsynced.
A lost write leaves zeros where a later write past it persisted.

In every state it checks that every checkpoint file (*.safetensors) and
config.json is, byte for byte, either its BEFORE or its AFTER version (never a
mix, never missing when it existed before); metrics.jsonl may end anywhere, or
hold zeros where a lost append was followed by a kept one (a log, cut on
resume). For each combination of those files' versions it writes up to M
(default 8) of the distinct states as run directories OUT_PARENT/state_<n>
(temporaries the crash left included), spread from the least to the most
lost, for the caller to resume. Prints the counts and one line per directory;
exit 1 on a violation.

The data of each write is taken from AFTER (every file the run writes is
written once, in order, and renamed into place, or appended to), so the trace
needs no data dumps.
"""
import hashlib
import itertools
import os
import random
import re
import sys

CALL = re.compile(r'^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)')
FD_PATH = re.compile(r'^(-?\d+)<([^>]*)>')


def parse(trace, run_dir):
    """The calls on files of run_dir, in order: (op, args...)."""
    ops = []
    run_dir = os.path.realpath(run_dir)
    inside = lambda p: os.path.dirname(os.path.realpath(p)) == run_dir if p else False
    for line in open(trace, errors="replace"):
        m = CALL.match(line.strip())
        if not m:
            continue
        name, args, ret = m.group(1), m.group(2), int(m.group(3))
        if ret < 0:
            continue
        if name in ("openat", "open", "creat"):
            # openat(AT_FDCWD<...>, "path", O_WRONLY|O_CREAT|..., 0644) = 3</abs/path>
            path = line.rsplit("<", 1)[-1].rstrip(">\n") if line.rstrip().endswith(">") else None
            flags = args.split(",")[2] if name == "openat" and args.count(",") >= 2 else args.split(",")[1]
            if path and inside(path) and ("O_WRONLY" in flags or "O_RDWR" in flags or name == "creat"):
                ops.append(("open", path, ret, "O_CREAT" in flags, "O_TRUNC" in flags, "O_APPEND" in flags))
        elif name in ("write", "pwrite64"):
            fm = FD_PATH.match(args)
            if fm and inside(fm.group(2)):
                off = None
                if name == "pwrite64":
                    off = int(args.rsplit(",", 1)[1])
                ops.append(("write", fm.group(2), int(fm.group(1)), ret, off))
        elif name in ("fsync", "fdatasync"):
            fm = FD_PATH.match(args)
            if fm and (inside(fm.group(2)) or os.path.realpath(fm.group(2)) == run_dir):
                ops.append(("fsync", os.path.realpath(fm.group(2))))
        elif name in ("rename", "renameat", "renameat2"):
            paths = re.findall(r'"([^"]*)"', args)
            if len(paths) == 2:
                cwd_rel = [p if os.path.isabs(p) else None for p in paths]
                if all(cwd_rel) and inside(paths[0]) and inside(paths[1]):
                    ops.append(("rename", os.path.realpath(paths[0]), os.path.realpath(paths[1])))
        elif name in ("unlink", "unlinkat"):
            paths = re.findall(r'"([^"]*)"', args)
            if paths and os.path.isabs(paths[-1]) and inside(paths[-1]):
                ops.append(("unlink", os.path.realpath(paths[-1])))
        elif name == "ftruncate":
            fm = FD_PATH.match(args)
            if fm and inside(fm.group(2)):
                ops.append(("truncate", fm.group(2), int(fm.group(1)), int(args.rsplit(",", 1)[1])))
    return ops


def files_of(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))
            if os.path.isfile(os.path.join(d, n))}


class Replay:
    """Turns the parsed calls into inode-level operations with their data."""

    def __init__(self, ops, run_dir, before, after):
        self.run_dir = os.path.realpath(run_dir)
        self.before, self.after = before, after
        # The final name of every path that is renamed later (a temporary's data is its target's).
        final = {}
        for op in reversed(ops):
            if op[0] == "rename":
                final[op[1]] = final.get(op[2], op[2])
        self.steps = []  # (kind, ...): create(name, inode), write(inode, off, data), rename(a, b), unlink(name), fsync(inode|dir)
        names = {os.path.basename(n): i for i, n in enumerate(before)}  # name -> inode (the BEFORE files are inodes 0..)
        self.base_inodes = {i: before[n] for n, i in names.items()}
        next_inode = len(names)
        fds = {}  # fd -> [inode, offset, append, path]
        size = {i: len(d) for i, d in self.base_inodes.items()}
        for op in ops:
            kind = op[0]
            if kind == "open":
                _, path, fd, creat, trunc, append = op
                name = os.path.basename(path)
                if name not in names:
                    names[name] = next_inode
                    size[next_inode] = 0
                    self.steps.append(("create", name, next_inode))
                    next_inode += 1
                inode = names[name]
                if trunc:
                    self.steps.append(("truncate", inode, 0))
                    size[inode] = 0
                fds[fd] = [inode, 0, append, path]
            elif kind == "write":
                _, path, fd, n, off = op
                if fd not in fds:
                    continue
                inode, pos, append, opened = fds[fd]
                at = size[inode] if append else (off if off is not None else pos)
                src = os.path.basename(final.get(os.path.realpath(opened), os.path.realpath(opened)))
                data = self.after.get(src, b"")[at:at + n]
                data = data + b"\0" * (n - len(data))
                self.steps.append(("write", inode, at, data))
                size[inode] = max(size[inode], at + n)
                if off is None:
                    fds[fd][1] = at + n
            elif kind == "truncate":
                _, path, fd, length = op
                if fd in fds:
                    self.steps.append(("truncate", fds[fd][0], length))
                    size[fds[fd][0]] = length
            elif kind == "fsync":
                target = op[1]
                if target == self.run_dir:
                    self.steps.append(("fsync_dir",))
                elif os.path.basename(target) in names:
                    self.steps.append(("fsync", names[os.path.basename(target)]))
            elif kind == "rename":
                a, b = os.path.basename(op[1]), os.path.basename(op[2])
                if a in names:
                    names[b] = names.pop(a)
                    self.steps.append(("rename", a, b))
            elif kind == "unlink":
                a = os.path.basename(op[1])
                if a in names:
                    names.pop(a)
                    self.steps.append(("unlink", a))

    def durable(self, k):
        """Which of the first k steps a power cut right after them cannot lose."""
        keep = [False] * k
        for j in range(k):
            s = self.steps[j]
            if s[0] not in ("fsync", "fsync_dir"):
                continue
            keep[j] = True
            for i in range(j):
                t = self.steps[i]
                if s[0] == "fsync" and t[0] in ("write", "truncate") and t[1] == s[1]:
                    keep[i] = True
                elif s[0] == "fsync_dir" and t[0] in ("create", "rename", "unlink"):
                    keep[i] = True
        return keep

    def state(self, k, lost):
        """The directory (name -> bytes) after the first k steps, the steps in `lost` not persisted."""
        names = {n: i for i, n in enumerate(self.before)}
        content = {i: bytearray(d) for i, d in self.base_inodes.items()}
        for j in range(k):
            if j in lost:
                continue
            s = self.steps[j]
            if s[0] == "create":
                names[s[1]] = s[2]
                content.setdefault(s[2], bytearray())
            elif s[0] == "truncate":
                content.setdefault(s[1], bytearray())
                del content[s[1]][s[2]:]
            elif s[0] == "write":
                buf = content.setdefault(s[1], bytearray())
                if len(buf) < s[2]:
                    buf.extend(b"\0" * (s[2] - len(buf)))
                buf[s[2]:s[2] + len(s[3])] = s[3]
            elif s[0] == "rename":
                if s[1] in names:
                    names[s[2]] = names.pop(s[1])
            elif s[0] == "unlink":
                names.pop(s[1], None)
        return {n: bytes(content.get(i, b"")) for n, i in names.items()}


def main():
    args = sys.argv[1:]
    max_subsets, per_combination = 4096, 8
    for flag in ("--max-subsets", "--per-combination"):
        if flag in args:
            i = args.index(flag)
            if flag == "--max-subsets":
                max_subsets = int(args[i + 1])
            else:
                per_combination = int(args[i + 1])
            del args[i:i + 2]
    trace, run_dir, before_dir, after_dir, out_parent = args
    before, after = files_of(before_dir), files_of(after_dir)
    run_dir = os.path.realpath(run_dir)
    ops = parse(trace, run_dir)
    r = Replay(ops, run_dir, before, after)
    n_steps = len(r.steps)
    counts = {k: sum(1 for s in r.steps if s[0] == k) for k in ("create", "write", "fsync", "fsync_dir", "rename", "unlink")}
    print(f"power_cut: {n_steps} file-system steps in the run directory: " +
          ", ".join(f"{v} {k}" for k, v in counts.items()))
    if counts["rename"] == 0 or counts["fsync"] == 0:
        print("power_cut: FAIL: the trace shows no atomic save (no rename or no fsync): nothing was checked")
        return 1
    rng = random.Random(7)
    seen, violations, states = {}, [], 0
    for k in range(n_steps + 1):
        keep = r.durable(k)
        loose = [i for i in range(k) if not keep[i]]
        if 2 ** len(loose) <= max_subsets:
            subsets = (set(c) for n in range(len(loose) + 1) for c in itertools.combinations(loose, n))
        else:
            picks = [set(), set(loose)] + [set(loose[:n]) for n in range(len(loose))] + \
                    [set(loose[n:]) for n in range(len(loose))] + [{i} for i in loose] + \
                    [{i for i in loose if rng.random() < 0.5} for _ in range(256)]
            subsets = iter(picks)
        for lost in subsets:
            states += 1
            st = r.state(k, lost)
            # States that differ only in a temporary's bytes resume alike (the next run
            # removes temporaries): one directory per state of the other files.
            key = hashlib.sha256(repr(sorted((n, len(d) if n.endswith(".tmp") else hashlib.sha256(d).hexdigest())
                                             for n, d in st.items())).encode()).hexdigest()
            for name in before:
                if not (name.endswith(".safetensors") or name == "config.json"):
                    continue
                got = st.get(name)
                if got is None:
                    violations.append(f"crash after step {k}, lost {sorted(lost)}: {name} is missing")
                elif got != before[name] and got != after.get(name):
                    violations.append(f"crash after step {k}, lost {sorted(lost)}: {name} is neither the previous "
                                      f"nor the new version ({len(got)} bytes)")
            if key in seen:
                continue
            versions = tuple((n, "new" if st.get(n) == after.get(n) and st.get(n) != before.get(n) else "previous")
                             for n in sorted(before) if n.endswith(".safetensors") or n == "config.json")
            seen[key] = (k, sorted(lost), versions)
    # One run directory per sample: for each combination of file versions, up to
    # --per-combination states spread over how much was lost (the fewest and the
    # most included), so the damaged logs are among them.
    groups = {}
    for k, lost, versions in seen.values():
        groups.setdefault(versions, []).append((len(lost), k, lost))
    written = 0
    for versions in sorted(groups):
        g = sorted(groups[versions], key=lambda x: (x[0], x[1]))
        n = min(per_combination, len(g))
        picks = sorted({round(i * (len(g) - 1) / max(1, n - 1)) for i in range(n)})
        for p in picks:
            nlost, k, lost = g[p]
            st = r.state(k, set(lost))
            written += 1
            d = os.path.join(out_parent, f"state_{written}")
            os.makedirs(d)
            for name, data in st.items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
            print(f"state {d} (crash after step {k} of {n_steps}, {nlost} steps lost: " +
                  ", ".join(f"{n} {v}" for n, v in versions) + ")")
    print(f"power_cut: {states} crash states checked, {len(seen)} distinct run directories, "
          f"{len(groups)} combinations of file versions, {written} written for resuming")
    for v in violations[:20]:
        print("power_cut: FAIL: " + v)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
