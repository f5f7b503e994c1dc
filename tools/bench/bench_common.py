# SPDX-License-Identifier: BSD-3-Clause
"""Helpers shared by the benchmark drivers (bench_rem.py, bench_sru.py)."""
import subprocess
import sys


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
