#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""REM / RSA benchmarks: Remora beside PyTorch eager, one table.

    /usr/bin/python3 tools/bench/bench_rem.py [--threads 1,2] [--quick] [--bin PATH]
                                        [--torch2 PYTHON]

Run from the repository root after building (./build/tools/remora_bench_rem).
Needs Debian's python3-torch (PyTorch 1.13), hence /usr/bin/python3.

1. Numerics (once, small sizes, float32): writes inputs to a safetensors file,
   runs `remora_bench_rem --check IN OUT` and compares Remora's rsa_attention
   output and gradients (and rem_apply's P v) with tools/torch_ref/rem.py.
2. (a) RSA attention forward + backward, sum(out * probe).backward(), at
   B=8, H=8, D=64, L in {256, 1024}, causal, 4 REM heads (regular 2, cyclic 1
   pair), per-head gate: PyTorch eager (the dense P, as a PyTorch user writes
   it) timed here, Remora's fused rsa_attention timed by remora_bench_rem.
3. (b) Remora's rem_apply (O(L) scan) against the dense rem_matrix + matmul,
   time and peak memory, from remora_bench_rem.

Both sides use the same thread count (torch.set_num_threads(N) and
remora_bench_rem --threads N); every table is printed once per count in
--threads (default 1,2), so thread scaling is visible. Times are medians of
repeated runs after warmup. (a) also prints its GFLOP/s and the fraction of
the f32 sgemm GFLOP/s measured in the same run (the roofline), and, with
--torch2 PYTHON (bash tools/bench/torch2_env.sh), PyTorch 2.x eager and
torch.compile beside PyTorch 1.13; the ratio is against the fastest peer.
"""
import argparse
import json
import math
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
sys.path.insert(0, HERE)
from torch_ref.rem import (causal_mask, load_safetensors, num_heads,  # noqa: E402
                           normalize_spec, rsa_attention, save_safetensors)

BENCH_SPEC = {"regular": 2, "cyclic": 1}
# Same values as remora_bench_rem's bench_params().
BENCH_PARAMS = {"eta": [1.5, -1.2], "nu": [1.5], "theta": [math.pi / 4],
                "mu": [-1.0, 0.5, 2.0, -2.5]}


def spec_tensor(spec):
    s = normalize_spec(spec)
    vals = [s["regular"], s["cyclic"], s["dilated_regular"], s["dilated_cyclic"],
            int(s["masked"]), s["max_distance"]] + list(s["dilations"])
    return torch.tensor(vals, dtype=torch.int64)


# ---- 1. numerics ----

def check_case(binary, threads, name, spec, B, H, Lq, Lk, D, causal, seed, pad=0):
    g = torch.Generator().manual_seed(seed)
    s = normalize_spec(spec)
    Hr = num_heads(s)
    n_eta = s["regular"] + s["dilated_regular"]
    n_cyc = s["cyclic"] + s["dilated_cyclic"]
    inp = {
        "spec": spec_tensor(s),
        "q": torch.randn(B, H, Lq, D, generator=g),
        "k": torch.randn(B, H, Lk, D, generator=g),
        "v": torch.randn(B, H, Lk, D, generator=g),
        "probe": torch.randn(B, H, Lq, D, generator=g),
        "mu": torch.empty(Hr).uniform_(-3, 3, generator=g),
    }
    if n_eta:
        sign = torch.where(torch.rand(n_eta, generator=g) < 0.5, -1.0, 1.0)
        inp["eta"] = sign * torch.empty(n_eta).uniform_(1, 2, generator=g)
    if n_cyc:
        inp["nu"] = torch.empty(n_cyc).uniform_(1, 2, generator=g)
        inp["theta"] = torch.empty(n_cyc).uniform_(0, math.pi, generator=g)
    if causal:
        inp["attn_mask"] = causal_mask(Lq, Lk)
    if pad:  # the last `pad` keys of batch element 0 are padding
        kp = torch.zeros(B, Lk, dtype=torch.int64)
        kp[0, Lk - pad:] = 1
        inp["key_padding"] = kp
    with tempfile.TemporaryDirectory() as tmp:
        fin, fout = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
        save_safetensors(fin, inp)
        subprocess.run([binary, "--check", fin, fout, "--threads", str(threads)], check=True,
                       stdout=subprocess.DEVNULL)
        got = load_safetensors(fout)
    leaves = {n: inp[n].clone().requires_grad_() for n in ("q", "k", "v", "mu", "eta", "nu", "theta")
              if n in inp}
    out = rsa_attention(leaves["q"], leaves["k"], leaves["v"], s, leaves.get("eta"),
                        leaves.get("nu"), leaves.get("theta"), leaves["mu"],
                        attn_mask=inp.get("attn_mask"), key_padding=inp.get("key_padding"))
    (out * inp["probe"]).sum().backward()
    from torch_ref.rem import rem_matrix
    with torch.no_grad():
        P = rem_matrix(s, inp.get("eta"), inp.get("nu"), inp.get("theta"), Lq, Lk,
                       inp.get("key_padding"))
        rem_y = torch.matmul(P, inp["v"][:, :Hr])
    want = {"out": out.detach(), "rem_y": rem_y}
    for n, t in leaves.items():
        want["d" + n] = t.grad
    worst = 0.0
    lines = []
    for key, ref in want.items():
        err = (got[key] - ref).abs().max().item()
        rel = err / max(1.0, ref.abs().max().item())  # absolute below 1, relative above
        worst = max(worst, rel)
        lines.append(f"{key} {err:.1e}")
    ok = worst <= 1e-4
    print(f"  {name}: {'OK' if ok else 'MISMATCH'} (max error / max(1, |ref|) = {worst:.1e}; "
          + ", ".join(lines) + ")")
    return ok


def check_numerics(binary, threads):
    print("Numerics: Remora vs tools/torch_ref/rem.py (float32, tolerance 1e-4)")
    ok = check_case(binary, threads, "bench spec, causal, B2 H8 L64 D16", BENCH_SPEC,
                    2, 8, 64, 64, 16, True, 1)
    ok &= check_case(binary, threads,
                     "all head kinds, dilations [2,3], max_distance 9, memory Lq12/Lk20, causal",
                     {"regular": 1, "cyclic": 1, "dilated_regular": 1, "dilated_cyclic": 1,
                      "dilations": [2, 3], "max_distance": 9},
                     2, 7, 12, 20, 8, True, 2)
    ok &= check_case(binary, threads, "unmasked REM (bidirectional), no mask, Lq12/Lk20",
                     {"regular": 1, "cyclic": 1, "dilated_regular": 1, "dilations": [2],
                      "masked": False}, 2, 5, 12, 20, 8, False, 3)
    # Long enough for rsa_attention's causal row blocks (128 rows): 3 blocks, memory, padding.
    ok &= check_case(binary, threads, "bench spec + 1 plain head, causal, memory Lq300/Lk340, "
                     "key padding", BENCH_SPEC, 2, 5, 300, 340, 16, True, 4, pad=7)
    return ok


# ---- 2. (a) PyTorch RSA forward + backward (eager, or torch.compile'd) ----

def time_torch_rsa(B, H, L, D, threads, quick, compile_model=False):
    torch.set_num_threads(threads)
    torch.manual_seed(1234)
    q, k, v = (torch.randn(B, H, L, D).requires_grad_() for _ in range(3))
    probe = torch.randn(B, H, L, D)
    mask = causal_mask(L, L)
    params = {n: torch.tensor(x, dtype=torch.float32).requires_grad_()
              for n, x in BENCH_PARAMS.items()}
    leaves = [q, k, v] + list(params.values())

    def fwd(q, k, v, eta, nu, theta, mu):
        return rsa_attention(q, k, v, BENCH_SPEC, eta, nu, theta, mu, attn_mask=mask)
    if compile_model:
        fwd = torch.compile(fwd)

    def step():
        for t in leaves:
            t.grad = None
        out = fwd(q, k, v, params["eta"], params["nu"], params["theta"], params["mu"])
        (out * probe).sum().backward()

    # Same schedule as remora_bench_rem: warmup, then ~3 s of reps within [5, 15]
    # (torch.compile compiles in the first call, so it gets one more warmup call).
    step()
    for _ in range((0 if L >= 1024 else 1) + (1 if compile_model else 0)):
        step()
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    reps = 2 if quick else max(5, min(15, math.ceil(3.0 / max(first, 1e-6))))
    ts = []
    for _ in range(reps):
        a = time.perf_counter()
        step()
        ts.append((time.perf_counter() - a) * 1e3)
    return statistics.median(ts)


def torch2_child(python, B, H, L, D, threads, quick, compile_model):
    """PyTorch 2.x's median ms from a child under `python`, or None when it fails."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [python, os.path.abspath(__file__), "--torch-child", path,
           "--shape", f"{B},{H},{L},{D}", "--threads", str(threads)]
    cmd += (["--quick"] if quick else []) + (["--compile"] if compile_model else [])
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(f"PyTorch 2.x child failed ({'compiled' if compile_model else 'eager'}, "
                         f"L={L}):\n{p.stderr[-2000:]}\n")
        return None
    r = json.load(open(path))
    os.unlink(path)
    return r


def causal_flops(B, H, L, D):
    """Useful FLOPs of causal attention forward + backward: per (b, h), QK^T and
    PV forward (2 L^2 D each) and dV, dP, dQ, dK backward (2 L^2 D each) on the
    L(L+1)/2 visible (i, j) pairs; the O(L) REM scan and elementwise work are
    not counted (FlashAttention's convention, without its recomputation)."""
    return 12.0 * B * H * D * L * (L + 1) / 2


# ---- table ----

def fmt_ms(x):
    return f"{x:>9.1f}" if x is not None else f"{'-':>9}"


def run_threads(args, threads, torch2_version, rec):
    torch.set_num_threads(threads)
    cmd = [args.bin, "--json", "--threads", str(threads)] + (["--quick"] if args.quick else [])
    rem = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
    rows = rem["results"]
    def gemm_gflops(bench):
        r = next(r for r in rows if r["bench"] == bench)
        return r["L"], 2.0 * r["L"] ** 3 / (r["median_ms"] * 1e-3) / 1e9
    n, remora_gflops = gemm_gflops("sgemm")
    _, blas_gflops = gemm_gflops("sgemm_blas")
    sgemm_gflops = max(remora_gflops, blas_gflops)

    print()
    print(f"==== {threads} thread{'s' if threads > 1 else ''} ====")
    print(f"roofline: f32 gemm n={n}, the faster of Remora's matmul ({remora_gflops:.1f} GFLOP/s)"
          f" and raw cblas_sgemm ({blas_gflops:.1f}), same run")
    print("(a) RSA attention forward + backward, float32, causal, 4 REM heads, median ms;"
          " GFLOP = useful causal attention FLOPs (12 B H D L(L+1)/2)")
    head = (f"{'B':>3} {'H':>3} {'L':>6} {'D':>3} | {'Remora':>9} {'GFLOP/s':>8} {'%sgemm':>7} | "
            f"{'PT1.13':>9}")
    if torch2_version:
        head += f" {'PT2 eager':>9} {'PT2 comp':>9}"
    print(head + f" | {'Remora/best peer':>16}")
    for r in (r for r in rows if r["bench"] == "rsa"):
        B, H, L, D = r["B"], r["H"], r["L"], r["D"]
        gflops = causal_flops(B, H, L, D) / (r["median_ms"] * 1e-3) / 1e9
        peers = {"PT1.13": time_torch_rsa(B, H, L, D, threads, args.quick)}
        line = (f"{B:>3} {H:>3} {L:>6} {D:>3} | {r['median_ms']:>9.1f} {gflops:>8.1f} "
                f"{100 * gflops / sgemm_gflops:>6.1f}% | {fmt_ms(peers['PT1.13'])}")
        if torch2_version:
            for name, comp in (("PT2 eager", False), ("PT2 comp", True)):
                t2 = torch2_child(args.torch2, B, H, L, D, threads, args.quick, comp)
                peers[name] = t2["median_ms"] if t2 else None
                line += f" {fmt_ms(peers[name])}"
        best = min(v for v in peers.values() if v is not None)
        print(line + f" | {r['median_ms'] / best:>16.3f}")
        rec.row(part="rsa", threads=threads, B=B, H=H, L=L, D=D, remora_ms=round(r["median_ms"], 3),
                gflops=round(gflops, 1), pct_gemm=round(100 * gflops / sgemm_gflops, 1),
                gemm_gflops_remora=round(remora_gflops, 1), gemm_gflops_blas=round(blas_gflops, 1),
                torch_eager_ms=round(peers["PT1.13"], 3),
                torch2_eager_ms=peers.get("PT2 eager") and round(peers["PT2 eager"], 3),
                torch2_compiled_ms=peers.get("PT2 comp") and round(peers["PT2 comp"], 3))

    print()
    print("(b) Remora rem_apply (scan) vs dense rem_matrix + matmul, B=1, Hr=4, D=64, masked;"
          " median ms, peak MiB above the child's baseline")
    print(f"{'L':>6} {'mode':>8} | {'scan ms':>9} {'dense ms':>9} {'speedup':>8} | "
          f"{'scan MiB':>9} {'dense MiB':>9}")
    get = {(r["impl"].split()[0], r["mode"], r["L"]): r for r in rows if r["bench"] == "rem"}
    for L in sorted({r["L"] for r in rows if r["bench"] == "rem"}):
        for mode in ("fwd", "fwd+bwd"):
            s, d = get[("scan", mode, L)], get[("dense", mode, L)]
            print(f"{L:>6} {mode:>8} | {s['median_ms']:>9.2f} {d['median_ms']:>9.2f} "
                  f"{d['median_ms'] / s['median_ms']:>7.1f}x | {s['peak_mib']:>9.1f} "
                  f"{d['peak_mib']:>9.1f}")
            rec.row(part="rem", threads=threads, L=L, mode=mode, scan_ms=round(s["median_ms"], 3),
                    dense_ms=round(d["median_ms"], 3), scan_mib=round(s["peak_mib"], 1),
                    dense_mib=round(d["peak_mib"], 1))
    if not all(r["ok"] for r in rows):
        print("some Remora configurations FAILED")
        return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--threads", default="1,2",
                    help="thread counts, comma-separated: one table each (default 1,2)")
    ap.add_argument("--quick", action="store_true", help="tiny shapes (smoke test)")
    ap.add_argument("--bin", default=os.path.join("build", "tools", "remora_bench_rem"))
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--torch2", default="",
                    help="a python with PyTorch 2.x (bash tools/bench/torch2_env.sh prints one): adds "
                         "its eager and torch.compile peers")
    ap.add_argument("--torch-child", default="", help=argparse.SUPPRESS)  # internal
    ap.add_argument("--shape", default="", help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    add_record_args(ap, "rem")
    args = ap.parse_args()
    thread_list = parse_threads(args.threads)

    if args.torch_child:  # one PyTorch measurement, under the --torch2 interpreter
        B, H, L, D = (int(x) for x in args.shape.split(","))
        ms = time_torch_rsa(B, H, L, D, thread_list[0], args.quick, args.compile)
        json.dump({"median_ms": ms, "version": torch.__version__}, open(args.torch_child, "w"))
        return

    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} not found: build first (cmake --build build) or pass --bin")
    torch2_version = torch2_version_of(args.torch2)
    print(f"peers: PyTorch {torch.__version__} eager (this interpreter)"
          + (f"; PyTorch {torch2_version} eager and torch.compile ({args.torch2})"
             if torch2_version else "; no PyTorch 2.x (--torch2 PYTHON adds it)"))
    print(f"thread counts: {', '.join(map(str, thread_list))} (Remora --threads N, "
          "torch.set_num_threads(N))")

    rec = Recorder("rem", args, quick=args.quick)
    rec.peers = {"torch": torch.__version__, **({"torch2": torch2_version} if torch2_version else {})}
    ok = True
    if not args.skip_check:
        ok = check_numerics(args.bin, thread_list[-1])
    for threads in thread_list:
        ok &= run_threads(args, threads, torch2_version, rec)
    if ok:
        rec.write()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
