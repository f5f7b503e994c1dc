#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Runs a benchmark program and records its rows with the machine, date and commit.

    python3 tools/bench/record.py [--record FILE | --no-record] NAME -- COMMAND [ARG...]

For the benchmarks that are programs rather than Python scripts (build/tools/remora_bench,
tools/bench/bench_dist.sh): COMMAND runs with REMORA_BENCH_ROWS naming a temporary file,
to which it appends one JSON object per measured row; its own output is shown as it
comes. When it succeeds, the rows become one record appended to FILE (default
docs/data/bench/NAME.jsonl), as the Python benchmarks write theirs.

    python3 tools/bench/record.py core -- build/tools/remora_bench --threads 1,2
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import Recorder, add_record_args  # noqa: E402


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: record.py [--record FILE | --no-record] NAME -- COMMAND [ARG...]")
    cut = argv.index("--")
    command = argv[cut + 1:]
    ap = argparse.ArgumentParser(usage="record.py [--record FILE | --no-record] NAME -- COMMAND [ARG...]")
    ap.add_argument("name", help="the benchmark's name: its data file is NAME.jsonl")
    add_record_args(ap, "NAME")
    a = ap.parse_args(argv[:cut])
    if not a.name.replace("_", "").isalnum():
        sys.exit(f"record.py: NAME must be letters, digits and '_', got '{a.name}'")
    if not command:
        sys.exit("record.py: no COMMAND after --")
    rec = Recorder(a.name, a)
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", encoding="utf-8") as rows:
        try:
            rc = subprocess.run(command, env=dict(os.environ, REMORA_BENCH_ROWS=rows.name)).returncode
        except OSError as e:
            sys.exit(f"record.py: cannot run {command[0]}: {e.strerror}")
        if rc != 0:
            sys.exit(f"record.py: {command[0]} exited with {rc}; nothing recorded")
        for n, line in enumerate(rows, 1):
            if line.strip():
                try:
                    rec.row(**json.loads(line))
                except (ValueError, TypeError):
                    sys.exit(f"record.py: row {n} from {command[0]} is not a JSON object: {line.strip()[:80]}")
    if not rec.rows:
        print(f"record.py: {command[0]} wrote no rows (REMORA_BENCH_ROWS unused?); nothing recorded")
    rec.write()


if __name__ == "__main__":
    main()
