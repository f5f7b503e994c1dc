# SPDX-License-Identifier: BSD-3-Clause
"""Helpers shared by the benchmark drivers: argument parsing, the PyTorch 2.x peer, and the
measurement records every run appends to its data file."""
import json
import os
import shlex
import subprocess
import sys
import time


def parse_threads(text):
    """'1,2' -> [1, 2]; exits with a message on anything else."""
    try:
        threads = [int(t) for t in text.split(",")]
        assert threads and min(threads) >= 1
    except (ValueError, AssertionError):
        sys.exit(f"--threads: expected positive integers separated by commas, got '{text}'")
    return threads


def torch2_version(python):
    """The torch version under the --torch2 interpreter ('' when none is given)."""
    if not python:
        return ""
    try:
        p = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                           stdout=subprocess.PIPE, text=True)
    except OSError as e:
        sys.exit(f"--torch2 {python}: cannot run it ({e.strerror})")
    if p.returncode != 0:
        sys.exit(f"--torch2 {python}: cannot import torch")
    return p.stdout.strip()


# ---- measurement records ----
#
# Every benchmark run that is not a --quick smoke test appends one record, a line of
# JSON, to a data file (default docs/data/bench/NAME.jsonl): what was measured (rows),
# on which machine, when, at which commit and with which command.
# tools/bench/bench_tables.py turns the newest records into the tables of
# docs/benchmarks.md.

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_DIR = os.path.join(ROOT, "docs", "data", "bench")
# CPU features that choose a kernel path somewhere in Remora (in /proc/cpuinfo's spelling).
ISA_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_bf16")
# Settings that change which kernels run or how threads wait.
PATH_ENV = ("OPENBLAS_CORETYPE", "REMORA_CPU_ISA", "REMORA_BF16_GEMM", "REMORA_SPIN_US",
            "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def machine_info():
    """The CPU (model name, family, model, the ISA flags above), logical CPUs this process
    may use, memory, and the kernel-path settings in the environment."""
    info = {"cpu": "", "family": None, "model": None, "isa": [], "cpus": len(os.sched_getaffinity(0)),
            "mem_gib": None, "env": {k: os.environ[k] for k in PATH_ENV if k in os.environ}}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and not info["cpu"]:
                    info["cpu"] = value
                elif key == "cpu family" and info["family"] is None:
                    info["family"] = int(value)
                elif key == "model" and info["model"] is None:
                    info["model"] = int(value)
                elif key == "flags":
                    flags = set(value.split())
                    info["isa"] = [f for f in ISA_FLAGS if f in flags]
                    break
        with open("/proc/meminfo", encoding="utf-8") as f:
            kib = int(next(line for line in f if line.startswith("MemTotal:")).split()[1])
            info["mem_gib"] = round(kib / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass  # not Linux: the record keeps what it has
    return info


def source_commit():
    """(commit, dirty) of the checkout the benchmark runs from (dirty: tracked files other
    than the data files differ from the commit); (None, None) outside git."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        if head.returncode != 0:
            return None, None
        # The records themselves do not count: a run that appends one leaves the next clean.
        status = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--",
                                 ".", ":(exclude)docs/data/bench"], capture_output=True, text=True, timeout=30)
        return head.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, None


def add_record_args(ap, name):
    """--record FILE / --no-record on a benchmark's argument parser."""
    ap.add_argument("--record", metavar="FILE",
                    help="append this run's measurements to FILE as a line of JSON (default "
                         f"{os.path.relpath(os.path.join(DATA_DIR, name + '.jsonl'), ROOT)}; never with --quick)")
    ap.add_argument("--no-record", action="store_true", help="print the tables only")


class Recorder:
    """Collects a benchmark's rows and appends them, with the machine, date, commit and
    command, as one line to the data file. Rows are flat dicts of numbers and strings."""

    def __init__(self, name, args, quick=False):
        self.name = name
        self.path = None if quick or args.no_record else (args.record or os.path.join(DATA_DIR, name + ".jsonl"))
        self.rows, self.peers, self.notes = [], {}, {}
        self.started = time.time()
        if self.path:  # refuse a bad destination before spending minutes measuring
            check_record_path(self.path)

    def row(self, **fields):
        self.rows.append(fields)

    def write(self):
        if not self.path or not self.rows:
            return
        commit, dirty = source_commit()
        record = {"bench": self.name,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                  "commit": commit, "dirty": dirty,
                  "command": " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
                  "machine": machine_info(), "peers": self.peers, "rows": self.rows}
        if self.notes:
            record["notes"] = self.notes
        line = json.dumps(record, sort_keys=True) + "\n"
        check_record_path(self.path)
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)  # one write: a record is whole or absent
        except OSError as e:  # the measurement is not lost: it goes to stdout instead
            sys.stdout.write(line)
            sys.exit(f"--record {self.path}: cannot write ({e.strerror}); the record is the line above")
        print(f"recorded {len(self.rows)} rows in {self.path}")


def check_record_path(path):
    if os.path.exists(path) and not os.path.isfile(path):
        sys.exit(f"--record {path}: not a regular file")
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.exists(parent) and not os.path.isdir(parent):
        sys.exit(f"--record {path}: {parent} is not a directory")


def read_records(path):
    """The records of one data file, oldest first; a malformed line is an error naming it."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                assert isinstance(rec, dict) and isinstance(rec.get("rows"), list) and "machine" in rec
            except (ValueError, AssertionError):
                sys.exit(f"{path}:{n}: not a benchmark record (one JSON object with 'rows' and 'machine')")
            out.append(rec)
    return out
