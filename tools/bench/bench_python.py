#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Remora from Python beside PyTorch, in one run on one CPU (docs/python.md).

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/bench_python.py [--threads 2] [--lengths 256,512,1024]

Prints, each figure beside its peer:
  1. the per-call time of small ops (a [4] f32 tensor): remora against torch;
  2. RSA attention forward + backward on torch CPU tensors (B 1, H 4, three of
     them REM heads: one regular and a cyclic pair; D 32; causal; f32):
     remora.torch.rsa_attention against the pure PyTorch composition of the same
     mathematics (softmax scores, the REM matrix built from its formula, the
     gate), eager, and compiled where this torch has torch.compile;
  3. the resident set over 100,000 zero-copy round trips (NumPy -> remora ->
     NumPy, and torch -> remora -> torch through DLPack), after 10,000 warm-up
     trips: a leak would grow it;
  4. the DLPack hand-over of a [1, 4, L, 32] f32 tensor, per call: remora ->
     torch (remora.torch.to_torch, which torch.from_dlpack does) and torch ->
     remora (to_remora), beside torch.from_dlpack of a torch tensor.
"""
import argparse
import math
import os
import platform
import resource
import sys
import time
import timeit

import numpy as np
import torch

import remora
import remora.torch as rt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import Recorder, add_record_args  # noqa: E402


def per_call(stmt, setup_globals, number=100_000, repeat=5):
    t = timeit.Timer(stmt, globals=setup_globals)
    return min(t.repeat(repeat=repeat, number=number)) / number * 1e6


def rem_matrix_torch(spec, eta, nu, theta, L):
    """The masked REM P [Hr, L, L] from its formula (docs/math.md)."""
    i = torch.arange(L, dtype=torch.float32)[:, None]
    j = torch.arange(L, dtype=torch.float32)[None, :]
    n = i - j
    valid = n >= 1
    safe = torch.where(valid, n, torch.ones_like(n))
    zero = torch.zeros_like(n)
    heads = [torch.where(valid, torch.tanh(eta[h]) ** safe, zero) for h in range(spec.regular)]
    for c in range(spec.cyclic):
        g = torch.sigmoid(nu[c])
        heads.append(torch.where(valid, g ** safe * torch.cos(safe * theta[c]), zero))
        heads.append(torch.where(valid, g ** safe * torch.sin(safe * theta[c]), zero))
    return torch.stack(heads)


def rsa_torch(q, k, v, spec, eta, nu, theta, mu, causal_mask):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + causal_mask
    A = torch.softmax(s, -1)
    P = rem_matrix_torch(spec, eta, nu, theta, q.shape[2])
    hr = P.shape[0]
    g = torch.sigmoid(mu)[:, None, None]
    mixed = (1 - g) * A[:, :hr] + g * P
    return torch.cat([mixed, A[:, hr:]], 1) @ v


def time_fwd_bwd(fn, inputs, reps):
    def once():
        for t in inputs:
            t.grad = None
        out = fn(*inputs)
        out.backward(torch.ones_like(out))
    once()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lengths", default="256,512,1024")
    ap.add_argument("--reps", type=int, default=5)
    add_record_args(ap, "python")
    a = ap.parse_args()
    rec = Recorder("python", a)
    rec.peers = {"torch": torch.__version__}
    torch.set_num_threads(a.threads)
    remora.set_num_threads(a.threads)
    print(f"CPU: {cpu_name()}, {a.threads} threads; torch {torch.__version__}, remora {remora.__version__}")

    print("\n1. per call (a [4] f32 tensor; best of 5 x 100,000 calls), microseconds")
    x, y = remora.randn(4), remora.randn(4)
    tx, ty = torch.randn(4), torch.randn(4)
    g = {"x": x, "y": y, "tx": tx, "ty": ty, "remora": remora, "torch": torch}
    print(f"{'call':<22}{'remora':>10}{'torch':>10}{'ratio':>8}")
    for name, rs, ts in [("x.exp()", "x.exp()", "tx.exp()"), ("x + y", "x + y", "tx + ty"),
                         ("x.sum(0)", "x.sum(0)", "tx.sum(0)"), ("softmax(x, 0)", "remora.softmax(x, 0)",
                                                                 "torch.softmax(tx, 0)")]:
        r, t = per_call(rs, g), per_call(ts, g)
        print(f"{name:<22}{r:>10.2f}{t:>10.2f}{r / t:>8.2f}")
        rec.row(part="call", threads=a.threads, call=name, remora_us=round(r, 3), torch_us=round(t, 3))

    print("\n2. RSA attention forward + backward (B 1, H 4, D 32, causal, f32; best of "
          f"{a.reps}), milliseconds")
    spec = remora.RemSpec(regular=1, cyclic=1)
    compiled = hasattr(torch, "compile")
    print(f"{'L':>6}{'remora.torch':>14}{'torch eager':>13}{'torch compiled':>16}{'eager / remora':>16}")
    for L in [int(v) for v in a.lengths.split(",")]:
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 4, L, 32, requires_grad=True) for _ in range(3))
        eta = torch.tensor([1.2], requires_grad=True)
        nu, theta = torch.tensor([1.5], requires_grad=True), torch.tensor([0.6], requires_grad=True)
        mu = torch.zeros(3, requires_grad=True)
        ins = [q, k, v, eta, nu, theta, mu]
        mask = torch.full((L, L), float("-inf")).triu(1)
        r = time_fwd_bwd(lambda q, k, v, e, n, t, m: rt.rsa_attention(q, k, v, spec, e, n, t, m, causal=True),
                         ins, a.reps)
        eager = time_fwd_bwd(lambda q, k, v, e, n, t, m: rsa_torch(q, k, v, spec, e, n, t, m, mask), ins, a.reps)
        comp = "n/a"
        if compiled:
            f = torch.compile(lambda q, k, v, e, n, t, m: rsa_torch(q, k, v, spec, e, n, t, m, mask))
            comp = f"{time_fwd_bwd(f, ins, a.reps):.2f}"
        print(f"{L:>6}{r:>14.2f}{eager:>13.2f}{comp:>16}{eager / r:>15.2f}x")
        rec.row(part="rsa", threads=a.threads, L=L, remora_torch_ms=round(r, 3), torch_eager_ms=round(eager, 3),
                torch_compiled_ms=float(comp) if compiled else None)
    if not compiled:
        print(f"(torch {torch.__version__} has no torch.compile)")

    print("\n3. zero-copy round trips: resident set (MiB)")
    a_np = np.ones((64, 64), dtype=np.float32)
    t_pt = torch.ones(64, 64)
    for name, trip in [("numpy -> remora -> numpy", lambda: remora.from_numpy(a_np).numpy()),
                       ("torch -> remora -> torch (DLPack)", lambda: rt.to_torch(rt.to_remora(t_pt)))]:
        for _ in range(10_000):
            trip()
        before = rss_mib()
        for _ in range(100_000):
            trip()
        after = rss_mib()
        print(f"{name:<36} before {before:8.1f}  after 100,000 trips {after:8.1f}  (+{after - before:.1f})")
        rec.row(part="roundtrip", trip=name, rss_before_mib=round(before, 1), rss_after_mib=round(after, 1))
    print(f"peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")

    print("\n4. DLPack hand-over of a [1, 4, L, 32] f32 tensor (best of 5 x 1,000 calls), microseconds")
    print(f"{'L':>6}{'remora -> torch':>17}{'torch -> remora':>17}{'torch -> torch':>16}")
    for L in [int(v) for v in a.lengths.split(",")]:
        r, t = remora.randn(1, 4, L, 32), torch.randn(1, 4, L, 32)
        g = {"rt": rt, "r": r, "t": t, "torch": torch}
        to_t = per_call("rt.to_torch(r)", g, number=1_000)
        to_r = per_call("rt.to_remora(t)", g, number=1_000)
        peer = per_call("torch.from_dlpack(t)", g, number=1_000)
        print(f"{L:>6}{to_t:>17.2f}{to_r:>17.2f}{peer:>16.2f}")
        rec.row(part="dlpack", L=L, to_torch_us=round(to_t, 3), to_remora_us=round(to_r, 3),
                torch_from_dlpack_us=round(peer, 3))
    rec.write()


if __name__ == "__main__":
    main()
