#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""SRU recurrence benchmark: Remora's fused sru_recurrence beside PyTorch eager.

    /usr/bin/python3 tools/bench/bench_sru.py [--threads 1,2] [--quick] [--bin PATH]
                                        [--torch2 PYTHON]

Run from the repository root after building (cmake --build build --target
remora_bench_sru). Needs Debian's python3-torch (PyTorch 1.13).

Both sides compute, in float32, the SRU elementwise recurrence (docs/math.md#the-sru-elementwise-recurrence)
  f = σ(u1 + v_f c + b_f), r = σ(u2 + v_r c + b_r), c = f c + (1 − f) u0,
  h = r c + (1 − r) x′
forward only, and forward + backward of sum(h * probe) with gradients for U, x,
v, b and c0, at the sizes of remora_bench_sru:
  L=256, B=16, D=512, k=3 (unidirectional), and L=1024, B=8, D=256, k=4 (bidirectional).
PyTorch eager is the loop a PyTorch user writes: one op per time step (autograd
records every step), the gate columns split once as in the official
elementwise_recurrence_naive (indexing U[t] inside the loop instead makes
PyTorch's backward ~30x slower still: every step's slice backward allocates a
full-size gradient of U). Remora runs in remora_bench_sru (a forked child per
configuration, median of repeated runs after warmup). Same thread count on both
sides (torch.set_num_threads(N), remora_bench_sru --threads N), one table per
count in --threads (default 1,2). --torch2 PYTHON (bash tools/bench/torch2_env.sh)
adds PyTorch 2.x eager and torch.compile (each in a child; a compile that runs
past --compile-timeout seconds is reported as such); the speedup is against the
fastest peer. The machine's
load average is printed: on a shared machine the numbers move, the ratio less.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from bench_common import (Recorder, add_record_args, parse_threads,  # noqa: E402
                          torch2_version as torch2_version_of)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = [dict(L=256, B=16, D=512, k=3, bidirectional=False),
         dict(L=1024, B=8, D=256, k=4, bidirectional=True)]
QUICK = [dict(L=16, B=2, D=8, k=3, bidirectional=False),
         dict(L=8, B=2, D=8, k=4, bidirectional=True)]


def sru_eager(U, x, v, b, c0, bidirectional):
    """One op per time step, per direction, written as the official
    elementwise_recurrence_naive: the gate columns are split once and cut into
    time steps with unbind (whose backward is one stack, not a full-size
    gradient per step as indexing U[t] inside the loop would give)."""
    L, B, D, k = U.shape
    xp = x if k == 3 else U[..., 3]
    dirs = [(0, D // 2, False), (D // 2, D, True)] if bidirectional else [(0, D, False)]
    outs = []
    for j0, j1, rev in dirs:
        vf, vr, bf, br = v[0, j0:j1], v[1, j0:j1], b[0, j0:j1], b[1, j0:j1]
        u0 = U[:, :, j0:j1, 0].unbind(0)
        u1 = U[:, :, j0:j1, 1].unbind(0)
        u2 = U[:, :, j0:j1, 2].unbind(0)
        xs = xp[:, :, j0:j1].unbind(0)
        c = c0[:, j0:j1]
        hs = [None] * L
        for t in (range(L - 1, -1, -1) if rev else range(L)):
            f = torch.sigmoid(u1[t] + vf * c + bf)
            r = torch.sigmoid(u2[t] + vr * c + br)
            c = f * c + (1 - f) * u0[t]
            hs[t] = r * c + (1 - r) * xs[t]
        outs.append(torch.stack(hs, 0))
    return torch.cat(outs, 2)


def time_torch(s, backward, quick, compile_model=False):
    g = torch.Generator().manual_seed(7)
    L, B, D, k = s["L"], s["B"], s["D"], s["k"]
    U = torch.randn(L, B, D, k, generator=g).requires_grad_()
    x = torch.randn(L, B, D, generator=g).requires_grad_() if k == 3 else None
    v = (torch.rand(2, D, generator=g) * 2 - 1).requires_grad_()
    b = torch.zeros(2, D).requires_grad_()
    c0 = torch.randn(B, D, generator=g).requires_grad_()
    probe = torch.randn(L, B, D, generator=g)
    leaves = [t for t in (U, x, v, b, c0) if t is not None]
    fn = torch.compile(sru_eager) if compile_model else sru_eager

    def op():
        if not backward:
            with torch.no_grad():
                fn(U, x, v, b, c0, s["bidirectional"])
            return
        for t in leaves:
            t.grad = None
        (fn(U, x, v, b, c0, s["bidirectional"]) * probe).sum().backward()

    warm, budget = (1, 0.1) if quick else (2, 3.0)
    if compile_model:
        op()  # compiles
    t0 = time.perf_counter()
    op()
    first = time.perf_counter() - t0
    for _ in range(warm - 1):
        op()
    reps = max(1 if quick else 5, min(30, int(budget / max(first, 1e-6))))
    ts = []
    for _ in range(reps):
        a = time.perf_counter()
        op()
        ts.append((time.perf_counter() - a) * 1e3)
    return statistics.median(ts), reps


def torch2_child(python, s, backward, threads, quick, compile_model, timeout):
    """(median ms, note) from a child under `python` (PyTorch 2.x); None and a
    note when it fails or runs past `timeout` seconds (torch.compile unrolls
    the L-step loop, so compiling the long sizes can take minutes)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [python, os.path.abspath(__file__), "--torch-child", path, "--size", json.dumps(s),
           "--threads", str(threads)] + (["--backward"] if backward else [])
    cmd += (["--quick"] if quick else []) + (["--compile"] if compile_model else [])
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f">{timeout}s"
    if p.returncode != 0:
        sys.stderr.write(f"PyTorch 2.x child failed: {p.stderr[-2000:]}\n")
        return None, "failed"
    r = json.load(open(path))
    os.unlink(path)
    return r["median_ms"], ""


def fmt(ms, note=""):
    return f"{ms:>10.2f}" if ms is not None else f"{note or '-':>10}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated: one table each")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "tools", "remora_bench_sru"))
    ap.add_argument("--torch2", default="", help="a python with PyTorch 2.x (bash tools/bench/torch2_env.sh)")
    ap.add_argument("--compile-timeout", type=int, default=300,
                    help="seconds allowed for one torch.compile peer (compile + timing)")
    ap.add_argument("--torch-child", default="", help=argparse.SUPPRESS)  # internal
    ap.add_argument("--size", default="", help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    add_record_args(ap, "sru")
    a = ap.parse_args()
    thread_list = parse_threads(a.threads)
    if a.torch_child:  # one PyTorch measurement, under the --torch2 interpreter
        torch.set_num_threads(thread_list[0])
        ms, _ = time_torch(json.loads(a.size), a.backward, a.quick, a.compile)
        json.dump({"median_ms": ms}, open(a.torch_child, "w"))
        return 0
    torch2_version = torch2_version_of(a.torch2)
    rec = Recorder("sru", a, quick=a.quick)
    rec.peers = {"torch": torch.__version__, **({"torch2": torch2_version} if torch2_version else {})}
    load0 = os.getloadavg()
    for threads in thread_list:
        torch.set_num_threads(threads)
        cmd = [a.bin, "--threads", str(threads), "--json"] + (["--quick"] if a.quick else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        remora = {(r["L"], r["B"], r["D"], r["k"], r["bidirectional"], r["mode"]): r
                  for r in json.loads(out)["results"]}
        print(f"SRU recurrence, float32, {threads} thread{'s' if threads > 1 else ''}; Remora "
              f"sru_recurrence (fused) vs PyTorch {torch.__version__} eager (one op per step)"
              + (f" and PyTorch {torch2_version} eager / torch.compile" if torch2_version else ""))
        head = (f"{'L':>5} {'B':>3} {'D':>5} {'k':>2} {'bidir':>5} {'mode':<8} {'remora_ms':>10} "
                f"{'pt1.13_ms':>10}")
        if torch2_version:
            head += f" {'pt2_ms':>10} {'pt2comp_ms':>10}"
        print(head + f" {'speedup vs best':>16}")
        for s in (QUICK if a.quick else SIZES):
            for backward in (False, True):
                mode = "fwd+bwd" if backward else "fwd"
                r = remora[(s["L"], s["B"], s["D"], s["k"], s["bidirectional"], mode)]
                t_ms, _ = time_torch(s, backward, a.quick)
                peers = [t_ms]
                row = dict(threads=threads, L=s["L"], B=s["B"], D=s["D"], k=s["k"],
                           bidirectional=bool(s["bidirectional"]), mode=mode,
                           remora_ms=round(r["median_ms"], 3), torch_eager_ms=round(t_ms, 3))
                line = (f"{s['L']:>5} {s['B']:>3} {s['D']:>5} {s['k']:>2} "
                        f"{'yes' if s['bidirectional'] else 'no':>5} {mode:<8} "
                        f"{r['median_ms']:>10.2f} {fmt(t_ms)}")
                if torch2_version:
                    for comp in (False, True):
                        ms, note = torch2_child(a.torch2, s, backward, threads, a.quick, comp,
                                                a.compile_timeout if comp else None)
                        line += f" {fmt(ms, note)}"
                        key = "torch2_compiled" if comp else "torch2_eager"
                        row[key + "_ms"] = round(ms, 3) if ms is not None else None
                        if ms is None:
                            row[key + "_note"] = note  # why there is no figure (a compile past the timeout)
                        if ms is not None:
                            peers.append(ms)
                print(line + f" {min(peers) / r['median_ms']:>15.1f}x")
                rec.row(**row)
        print()
    load1 = os.getloadavg()
    print(f"load average (1, 5, 15 min) before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} on {os.cpu_count()} CPUs")
    rec.notes = {"load_before": round(load0[0], 2), "load_after": round(load1[0], 2)}
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
