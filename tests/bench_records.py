#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Benchmark records: tools/bench/record.py writes what a benchmark measured with the
machine, date, commit and command, refuses bad destinations and bad rows, and
tools/bench/bench_tables.py renders a record as the page's table.

    bench_records.py SOURCE_DIR

Prints each failure and exits 1; 0 when all hold.
"""
import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def record(source, args, rows_shell):
    """Runs record.py with a shell command that appends rows_shell's output to REMORA_BENCH_ROWS."""
    cmd = [sys.executable, os.path.join(source, "tools", "bench", "record.py")] + args + [
        "--", "sh", "-c", rows_shell + ' >> "$REMORA_BENCH_ROWS"']
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def main():
    source = sys.argv[1]
    sys.path.insert(0, os.path.join(source, "tools", "bench"))
    import bench_tables
    from bench_common import read_records

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sub", "core.jsonl")
        row = {"row": "add f32 N=8", "threads": 2, "remora": 10.0, "peer": 8.0, "ratio_pct": 125.0,
               "unit": "GB/s", "peer_name": "memcpy", "reps": 3}
        for _ in range(2):
            r = record(source, ["--record", out, "core"], "echo '%s'" % json.dumps(row))
            check(r.returncode == 0, f"record.py exits 0 ({r.stderr.strip()})")
        recs = read_records(out)
        check(len(recs) == 2, "two runs make two records, appended")
        rec = recs[-1]
        check(rec["bench"] == "core" and rec["rows"] == [row], "the record holds the rows as written")
        m = rec["machine"]
        check(m["cpus"] >= 1 and isinstance(m["isa"], list) and "cpu" in m, "the machine is described")
        check(len(rec["date"]) == 20 and rec["date"].endswith("Z"), "the date is UTC, ISO 8601")
        check(rec["command"].startswith("tools/bench/record.py --record"), "the command is the one run")
        check("commit" in rec and "dirty" in rec, "the commit is recorded")

        # The table of that record: machine, date and command above, one line per row.
        bench_tables.DATA_DIR = os.path.dirname(out)
        table = bench_tables.render("test", "core", "bandwidth")
        check("| add f32 N=8 | 2 | 10.0 | 8.0 | 125.0 % |" in table, "the rendered table holds the row")
        check(table.count("Machine: ") == 1, "a repeated command shows its newest record only")

        # A record written by another version of a script (a field the view shows is missing):
        # an error naming the file and the record, not a traceback.
        with open(out, "a") as f:
            f.write(json.dumps(dict(rec, date="2026-01-01T00:00:00Z", command="other",
                                    rows=[{"row": "mul f32 N=8", "threads": 2}])) + "\n")
        r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import bench_tables; bench_tables.DATA_DIR = sys.argv[2]; "
                            "bench_tables.render('test', 'core', 'bandwidth')",
                            os.path.join(source, "tools", "bench"), os.path.dirname(out)],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and "the record of 2026-01-01" in r.stderr and "Traceback" not in r.stderr,
              "a record without a shown field is an error naming it")

        # Refused: a special file, a failing benchmark, a row that is not JSON.
        r = record(source, ["--record", "/dev/null", "core"], "echo '{}'")
        check(r.returncode != 0 and "not a regular file" in r.stderr + r.stdout, "/dev/null is refused")
        # A destination that cannot be written (a folder /proc will not create, even for
        # root): the record goes to stdout instead of being lost, and the exit is an error.
        r = record(source, ["--record", "/proc/remora_no_such_dir/core.jsonl", "core"], "echo '%s'" % json.dumps(row))
        check(r.returncode != 0 and "cannot write" in r.stderr and '"rows"' in r.stdout,
              "an unwritable destination prints the record instead of losing it")
        bad = os.path.join(tmp, "bad.jsonl")
        r = record(source, ["--record", bad, "core"], "echo 'not json'")
        check(r.returncode != 0 and not os.path.exists(bad), "a row that is not JSON records nothing")
        r = subprocess.run([sys.executable, os.path.join(source, "tools", "bench", "record.py"), "--record", bad,
                            "core", "--", "sh", "-c", "exit 3"], capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and "exited with 3" in r.stderr and not os.path.exists(bad),
              "a failing benchmark records nothing")
        with open(bad, "w") as f:
            f.write("{\"rows\": 1}\n")
        r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import bench_common; bench_common.read_records(sys.argv[2])",
                            os.path.join(source, "tools", "bench"), bad], capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and "bad.jsonl:1: not a benchmark record" in r.stderr,
              "a malformed data file is an error naming its line")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
