#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark tables of the docs, generated from the recorded measurements.

    python3 tools/bench/bench_tables.py            # rewrite the tables in docs/*.md
    python3 tools/bench/bench_tables.py --check    # exit 1 where a page and the data differ

Every benchmark appends its runs to docs/data/bench/NAME.jsonl (one record per line:
rows, machine, date, commit, command; tools/bench/bench_common.py). A page marks each
generated table with

    <!-- bench NAME VIEW -->
    ...
    <!-- end bench -->

and this script fills it with one table per (machine, command, peer versions): the
newest record of each, oldest first, with the machine, date, commit and command above it. The prose
around the blocks is the page's own.
"""
import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DATA_DIR, ROOT, read_records  # noqa: E402

PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
BLOCK = re.compile(r"(<!-- bench (\w+) (\w+) -->\n)(.*?)(<!-- end bench -->)", re.S)


def num(x, digits=1):
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def ratio(a, b, digits=2):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.{digits}f}x"


def best(*xs):
    xs = [x for x in xs if x is not None]
    return min(xs) if xs else None


# A view: (which rows, [(column header, cell(row, record))]).
VIEWS = {
    ("core", "matmul"): (lambda r: r["row"].startswith("matmul"), [
        ("row", lambda r, _: r["row"]), ("threads", lambda r, _: r["threads"]),
        ("Remora GFLOP/s", lambda r, _: num(r["remora"])),
        ("peer", lambda r, _: r["peer_name"]), ("peer GFLOP/s", lambda r, _: num(r["peer"])),
        ("Remora / peer", lambda r, _: f"{r['ratio_pct']:.0f} %"),
        ("bf16 path", lambda r, _: r.get("bf16_path") or "")]),
    ("core", "bandwidth"): (lambda r: not r["row"].startswith("matmul"), [
        ("row", lambda r, _: r["row"]), ("threads", lambda r, _: r["threads"]),
        ("Remora GB/s", lambda r, _: num(r["remora"])), ("memcpy GB/s", lambda r, _: num(r["peer"])),
        ("% of memcpy", lambda r, _: f"{r['ratio_pct']:.1f} %")]),
    ("rem", "rsa"): (lambda r: r["part"] == "rsa", [
        ("threads", lambda r, _: r["threads"]), ("B, H, L, D", lambda r, _: f"{r['B']}, {r['H']}, {r['L']}, {r['D']}"),
        ("Remora ms", lambda r, _: num(r["remora_ms"])),
        ("% of the run's f32 gemm", lambda r, _: f"{r['pct_gemm']:.1f} %"),
        ("PyTorch 1 eager ms", lambda r, _: num(r["torch_eager_ms"])),
        ("PyTorch 2 eager ms", lambda r, _: num(r.get("torch2_eager_ms"))),
        ("PyTorch 2 compiled ms", lambda r, _: num(r.get("torch2_compiled_ms"))),
        ("fastest peer / Remora", lambda r, _: ratio(best(r["torch_eager_ms"], r.get("torch2_eager_ms"),
                                                          r.get("torch2_compiled_ms")), r["remora_ms"], 1))]),
    ("rem", "scan"): (lambda r: r["part"] == "rem", [
        ("threads", lambda r, _: r["threads"]), ("L", lambda r, _: f"{r['L']:,}"), ("mode", lambda r, _: r["mode"]),
        ("scan ms", lambda r, _: num(r["scan_ms"], 2)), ("dense ms", lambda r, _: num(r["dense_ms"], 2)),
        ("dense / scan", lambda r, _: ratio(r["dense_ms"], r["scan_ms"], 1)),
        ("scan MiB", lambda r, _: num(r["scan_mib"])), ("dense MiB", lambda r, _: num(r["dense_mib"]))]),
    ("sru", "all"): (lambda r: True, [
        ("threads", lambda r, _: r["threads"]),
        ("L, B, D, k", lambda r, _: f"{r['L']}, {r['B']}, {r['D']}, {r['k']}" + (" bidir." if r["bidirectional"] else "")),
        ("mode", lambda r, _: r["mode"]), ("Remora ms", lambda r, _: num(r["remora_ms"], 2)),
        ("PyTorch 1 eager ms", lambda r, _: num(r["torch_eager_ms"], 2)),
        ("PyTorch 2 eager ms", lambda r, _: r.get("torch2_eager_note") or num(r.get("torch2_eager_ms"), 2)),
        ("PyTorch 2 compiled ms", lambda r, _: r.get("torch2_compiled_note") or num(r.get("torch2_compiled_ms"), 2)),
        ("fastest peer / Remora", lambda r, _: ratio(best(r["torch_eager_ms"], r.get("torch2_eager_ms"),
                                                          r.get("torch2_compiled_ms")), r["remora_ms"], 1))]),
    ("xl_train", "all"): (lambda r: True, [
        ("config", lambda r, _: f"{r['config']} ({r['attention']}, {r['batch']} x {r['seq_len']}, mem {r['mem_len']})"),
        ("threads", lambda r, _: r["threads"]), ("side", lambda r, _: r["side"]),
        ("tokens/s", lambda r, _: num(r["tokens_per_s"], 0)), ("peak RSS MiB", lambda r, _: num(r["peak_rss_mib"])),
        ("loss", lambda r, _: f"{r['loss']:.4f}"),
        ("Remora / it", lambda r, rec: xl_ratio(r, rec))]),
    ("finetune", "all"): (lambda r: True, [
        ("batch, steps", lambda r, _: f"{r['batch']}, {r['steps']}"), ("side", lambda r, _: r["side"]),
        ("seconds", lambda r, _: num(r["seconds"], 2)), ("examples/s", lambda r, _: num(r["examples_per_s"])),
        ("Remora / it", lambda r, rec: "" if r["side"] == "Remora" else
         ratio(r["seconds"], same(rec, r, side="Remora")["seconds"]))]),
    ("dist", "allreduce"): (lambda r: "allreduce" in r, [
        ("message", lambda r, _: r["allreduce"]), ("f32 values", lambda r, _: f"{r['values']:,}"),
        ("bytes", lambda r, _: f"{r['bytes']:,}"), ("time µs", lambda r, _: num(r["time_us"])),
        ("busbw GB/s", lambda r, _: num(r["busbw_gbs"], 2))]),
    ("dist", "training"): (lambda r: "ranks" in r, [
        ("config", lambda r, _: r["config"]), ("ranks", lambda r, _: r["ranks"]),
        ("rows / rank", lambda r, _: r["rows_per_rank"]), ("tokens/s", lambda r, _: num(r["tokens_per_s"], 0)),
        ("ms / step", lambda r, _: num(r["ms_per_step"])), ("speed-up", lambda r, _: f"{r['speedup']:.2f}"),
        ("load before / after", lambda r, _: f"{r['load_before']:.2f} / {r['load_after']:.2f}")]),
    ("cuda", "rsa"): (lambda r: r["part"] == "rsa", [
        ("L", lambda r, _: f"{r['L']:,}"), ("row", lambda r, _: r["row"]),
        ("fwd ms", lambda r, _: num(r["fwd_ms"], 3)), ("fwd+bwd ms", lambda r, _: num(r["fwd_bwd_ms"], 3))]),
    ("cuda", "flash"): (lambda r: r["part"] == "flash", [
        ("D", lambda r, _: r["D"]), ("L", lambda r, _: f"{r['L']:,}"), ("row", lambda r, _: r["row"]),
        ("fwd ms", lambda r, _: num(r["fwd_ms"], 3)), ("fwd+bwd ms", lambda r, _: num(r["fwd_bwd_ms"], 3)),
        ("fwd+bwd TFLOP/s", lambda r, _: num(r["tflops"], 2))]),
    ("python", "calls"): (lambda r: r["part"] == "call", [
        ("call", lambda r, _: f"`{r['call']}`"), ("threads", lambda r, _: r["threads"]),
        ("remora µs", lambda r, _: num(r["remora_us"], 2)), ("torch µs", lambda r, _: num(r["torch_us"], 2)),
        ("remora / torch", lambda r, _: ratio(r["remora_us"], r["torch_us"]))]),
    ("python", "rsa"): (lambda r: r["part"] == "rsa", [
        ("threads", lambda r, _: r["threads"]), ("L", lambda r, _: f"{r['L']:,}"),
        ("remora.torch ms", lambda r, _: num(r["remora_torch_ms"], 2)),
        ("torch eager ms", lambda r, _: num(r["torch_eager_ms"], 2)),
        ("torch compiled ms", lambda r, _: num(r.get("torch_compiled_ms"), 2)),
        ("eager / remora", lambda r, _: ratio(r["torch_eager_ms"], r["remora_torch_ms"], 1)),
        ("compiled / remora", lambda r, _: ratio(r.get("torch_compiled_ms"), r["remora_torch_ms"], 1))]),
    ("python", "roundtrip"): (lambda r: r["part"] == "roundtrip", [
        ("round trip", lambda r, _: r["trip"]), ("RSS before, MiB", lambda r, _: num(r["rss_before_mib"])),
        ("after 100,000 trips", lambda r, _: num(r["rss_after_mib"])),
        ("growth", lambda r, _: num(r["rss_after_mib"] - r["rss_before_mib"]))]),
    ("python", "dlpack"): (lambda r: r["part"] == "dlpack", [
        ("L", lambda r, _: f"{r['L']:,}"), ("remora -> torch µs", lambda r, _: num(r["to_torch_us"], 2)),
        ("torch -> remora µs", lambda r, _: num(r["to_remora_us"], 2)),
        ("torch.from_dlpack µs", lambda r, _: num(r["torch_from_dlpack_us"], 2))]),
    ("python_train", "all"): (lambda r: True, [
        ("config", lambda r, _: r["config"]), ("threads", lambda r, _: r["threads"]), ("side", lambda r, _: r["side"]),
        ("median tokens/s", lambda r, _: num(r["median_tokens_per_s"], 0)),
        ("best tokens/s", lambda r, _: num(r["best_tokens_per_s"], 0)),
        ("CPU s per run", lambda r, _: num(r["median_cpu_s"], 2)),
        ("it / driver (median)", lambda r, rec: ratio(r["median_tokens_per_s"],
                                                      same(rec, r, side="driver")["median_tokens_per_s"], 3))]),
}


def same(rec, row, **want):
    """The row of rec measured beside `row` (same shape) with the fields in `want`."""
    keys = [k for k in row if k not in ("side", "seconds", "examples_per_s", "tokens_per_s", "peak_rss_mib",
                                        "loss", "gpu_peak_mib", "median_tokens_per_s", "best_tokens_per_s",
                                        "median_cpu_s")]
    for r in rec["rows"]:
        if all(r.get(k) == row.get(k) for k in keys) and all(r.get(k) == v for k, v in want.items()):
            return r
    return row


def xl_ratio(row, rec):
    """Remora's tokens/s and peak RSS against this row's (Remora of the same precision)."""
    bf16 = "bf16" in row["side"]
    mine = same(rec, row, side="Remora bf16" if bf16 else "Remora")
    if mine is row:
        return ""
    return (f"{ratio(mine['tokens_per_s'], row['tokens_per_s'])} tokens/s, "
            f"{ratio(mine['peak_rss_mib'], row['peak_rss_mib'])} RSS")


def amd_core(cpu, family, model):
    """AMD's core generation from cpuid's family and model ('' when not an AMD CPU or not known)."""
    if "AMD" not in (cpu or "") or family is None or model is None:
        return ""
    if family == 23:
        return "Zen 2, " if model >= 0x30 else "Zen, "
    if family == 25:
        return "Zen 4, " if 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF else "Zen 3, "
    if family == 26:
        return "Zen 5, "
    return ""


def machine_line(rec):
    m = rec["machine"]
    where = (f"{m['cpu'] or 'unknown CPU'} ({amd_core(m['cpu'], m['family'], m['model'])}family {m['family']}, "
             f"model {m['model']}), {m['cpus']} CPUs")
    where += ", " + (" ".join(m["isa"]) if m["isa"] else "no AVX2 or AVX-512")
    if m.get("env"):
        where += ", " + " ".join(f"{k}={v}" for k, v in sorted(m["env"].items()))
    if rec.get("notes", {}).get("gpu"):
        where += ", GPU " + rec["notes"]["gpu"]
    commit = (rec["commit"] or "unknown")[:10] + (" with local changes" if rec.get("dirty") else "")
    peers = ", ".join(f"{k} {v}" for k, v in sorted(rec.get("peers", {}).items()))
    return (f"Machine: {where}. Date: {rec['date'][:16].replace('T', ' ')} UTC. Commit: {commit}."
            + (f" Peers: {peers}." if peers else "") + f" Command: `{rec['command']}`")


def machine_key(rec):
    m = rec["machine"]
    return (m.get("cpu"), m.get("family"), m.get("model"), tuple(m.get("isa") or ()), m.get("cpus"),
            tuple(sorted((m.get("env") or {}).items())))


def render(page, name, view):
    if (name, view) not in VIEWS:
        sys.exit(f"{page}: no view '{view}' of benchmark '{name}' (tools/bench/bench_tables.py VIEWS)")
    keep, columns = VIEWS[(name, view)]
    path = os.path.join(DATA_DIR, name + ".jsonl")
    if not os.path.isfile(path):
        sys.exit(f"{page}: no data file {os.path.relpath(path, ROOT)} for the block 'bench {name} {view}'")
    newest = {}
    for rec in read_records(path):
        try:
            kept = any(keep(r) for r in rec["rows"])
        except (KeyError, TypeError, AttributeError) as e:
            sys.exit(f"{os.path.relpath(path, ROOT)}: a row of the record of {rec.get('date', '?')} is not one "
                     f"the view '{name} {view}' reads ({type(e).__name__}: {e})")
        if kept:
            peers = tuple(sorted(rec.get("peers", {}).items()))
            newest[(machine_key(rec), rec["command"], peers)] = rec  # later lines supersede earlier ones
    out = []
    for rec in sorted(newest.values(), key=lambda r: r.get("date", "")):
        try:
            out.append(machine_line(rec))
            out.append("")
            out.append("| " + " | ".join(h for h, _ in columns) + " |")
            out.append("|" + "---|" * len(columns))
            for r in (r for r in rec["rows"] if keep(r)):
                out.append("| " + " | ".join(str(cell(r, rec)) for _, cell in columns) + " |")
            out.append("")
        except (KeyError, TypeError, ValueError) as e:  # a record of another version of the script
            sys.exit(f"{os.path.relpath(path, ROOT)}: the record of {rec.get('date', '?')} lacks what the view "
                     f"'{name} {view}' shows ({type(e).__name__}: {e})")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 where they differ")
    a = ap.parse_args()
    stale, blocks = [], 0
    for path in PAGES:
        page = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, ROOT)

        def fill(m):
            body = render(rel, m.group(2), m.group(3))
            if body != m.group(4):
                stale.append(f"{rel}: the table 'bench {m.group(2)} {m.group(3)}'")
            return m.group(1) + body + m.group(5)

        new = BLOCK.sub(fill, page)
        blocks += len(BLOCK.findall(page))
        if new != page and not a.check:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(new)
            os.replace(path + ".tmp", path)
    if blocks == 0:
        sys.exit("no '<!-- bench NAME VIEW -->' blocks in docs/*.md")
    if a.check:
        for s in stale:
            print(f"{s} differs from its data; run python3 tools/bench/bench_tables.py")
        sys.exit(1 if stale else 0)
    print(f"{len(stale)} of {blocks} tables rewritten" if stale else f"{blocks} tables are current")


if __name__ == "__main__":
    main()
