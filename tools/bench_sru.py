#!/usr/bin/python3
"""SRU recurrence benchmark: Remora's fused sru_recurrence beside PyTorch eager.

    /usr/bin/python3 tools/bench_sru.py [--threads N] [--quick] [--bin PATH]

Run from the repository root after building (cmake --build build --target
remora_bench_sru). Needs Debian's python3-torch (PyTorch 1.13).

Both sides compute, in float32, the SRU elementwise recurrence (SPEC §6)
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
sides (torch.set_num_threads(N), remora_bench_sru --threads N). The machine's
load average is printed: on a shared machine the numbers move, the ratio less.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
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


def time_torch(s, backward, quick):
    g = torch.Generator().manual_seed(7)
    L, B, D, k = s["L"], s["B"], s["D"], s["k"]
    U = torch.randn(L, B, D, k, generator=g).requires_grad_()
    x = torch.randn(L, B, D, generator=g).requires_grad_() if k == 3 else None
    v = (torch.rand(2, D, generator=g) * 2 - 1).requires_grad_()
    b = torch.zeros(2, D).requires_grad_()
    c0 = torch.randn(B, D, generator=g).requires_grad_()
    probe = torch.randn(L, B, D, generator=g)
    leaves = [t for t in (U, x, v, b, c0) if t is not None]

    def op():
        if not backward:
            with torch.no_grad():
                sru_eager(U, x, v, b, c0, s["bidirectional"])
            return
        for t in leaves:
            t.grad = None
        (sru_eager(U, x, v, b, c0, s["bidirectional"]) * probe).sum().backward()

    warm, budget = (1, 0.1) if quick else (2, 3.0)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "tools", "remora_bench_sru"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()
    cmd = [a.bin, "--threads", str(a.threads), "--json"] + (["--quick"] if a.quick else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    remora = {(r["L"], r["B"], r["D"], r["k"], r["bidirectional"], r["mode"]): r
              for r in json.loads(out)["results"]}
    print(f"SRU recurrence, float32, {a.threads} threads; PyTorch {torch.__version__} eager "
          f"(one op per step) vs Remora sru_recurrence (fused)")
    print(f"{'L':>5} {'B':>3} {'D':>5} {'k':>2} {'bidir':>5} {'mode':<8} {'torch_ms':>10} "
          f"{'remora_ms':>10} {'speedup':>8}")
    for s in (QUICK if a.quick else SIZES):
        for backward in (False, True):
            mode = "fwd+bwd" if backward else "fwd"
            t_ms, _ = time_torch(s, backward, a.quick)
            r = remora[(s["L"], s["B"], s["D"], s["k"], s["bidirectional"], mode)]
            print(f"{s['L']:>5} {s['B']:>3} {s['D']:>5} {s['k']:>2} "
                  f"{'yes' if s['bidirectional'] else 'no':>5} {mode:<8} {t_ms:>10.2f} "
                  f"{r['median_ms']:>10.2f} {t_ms / r['median_ms']:>7.1f}x")
    load1 = os.getloadavg()
    print(f"load average (1, 5, 15 min) before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    sys.exit(main())
