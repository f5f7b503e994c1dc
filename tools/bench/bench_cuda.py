#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""RSA attention on the GPU: Remora's fused CUDA kernel against PyTorch, side by side.

    python3 tools/bench/bench_cuda.py [--remora-bench build/tools/remora_bench_cuda | --remora-json rows.json]
                                [--L 1024,2048,4096] [--B 8] [--H 16] [--D 64] [--reps 10]
                                [--quick] [--xl] [--xl-config configs/xl.json]

Same problem on every row: q, k, v [B, H, L, D] float32, causal mask, 4 REM heads
(regular 2, cyclic 1 pair, one gate mu per head), loss sum(out * probe), forward
alone and forward + backward. Rows:

  remora fused     rsa_attention: the FlashAttention-style kernel (online softmax,
                   no L x L tensor), the REM part by the O(L) scan
  remora composed  rsa_attention_reference on the CUDA backend (S, A, dense P, matmuls)
  torch eager      tools/torch_ref/rem.py rsa_attention: the same math in PyTorch ops
  torch sdpa       the softmax part through PyTorch's scaled-dot-product attention
                   (torch.nn.functional.scaled_dot_product_attention in torch >= 2.0,
                   the private _scaled_dot_product_attention in 1.13 if present);
                   the REM heads still need P v, done densely as in eager

Each PyTorch timing is the median of `reps` calls after a warm-up call, with
torch.cuda.synchronize() around every call. TF32 is off on both sides
(torch.backends.cuda.matmul.allow_tf32 = False; Remora's default; REMORA_CUDA_TF32=1
turns Remora's on). A ratio > 1 means Remora is faster.

A second table compares the tensor-core FlashAttention kernels (remora_bench_cuda's
"flash" section: fused RSA attention with TF32 on, B=8, H=8 with 4 REM heads, D 64
and 128, causal) with their PyTorch peers on the same shapes, forward + backward:

  remora flash      rsa_attention with REMORA TF32 on (tensor cores)
  remora reference  rsa_attention with TF32 off (the FP32 reference kernel)
  torch eager RSA   tools/torch_ref/rem.py rsa_attention (TF32 allowed in torch for
                    this table, like Remora's flash row)
  torch sdpa f32    F.scaled_dot_product_attention(is_causal=True) alone (no REM
                    term), f32 inputs: whichever kernel torch picks for f32
                    (memory-efficient attention on current GPUs)
  torch sdpa bf16   the same in bfloat16: torch's FlashAttention-2 kernel
The ratio column is (peer ms) / (remora flash ms): the targets are >= 3 against
torch eager RSA and >= 0.6 against sdpa. TFLOP/s count 4 B H L^2 D / 2 for a causal
forward and 2.5x that for forward + backward (see tools/bench/bench_cuda.cpp).

--xl also runs tools/bench/bench_xl_train.py --device cuda (an XL training step against
PyTorch eager on the GPU).

Needs a CUDA GPU and a CUDA build of PyTorch; it says so and stops otherwise
(Debian's python3-torch is CPU-only).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "bench"))
from bench_common import Recorder, add_record_args  # noqa: E402

SPEC = {"regular": 2, "cyclic": 1, "dilated_regular": 0, "dilated_cyclic": 0, "dilations": [],
        "masked": True, "max_distance": 0}
PARAMS = {"eta": [1.2, -1.5], "nu": [1.4], "theta": [0.785], "mu": [-1.0, 0.5, 0.0, 1.0]}


def run_remora(binary, Ls, B, H, D, reps, quick, flash_B=8, flash_H=8, flash_Ds=(64, 128), json_path=None):
    """{(L, path): row} of the "rsa" section and {(D, L, path): row} of the "flash" one.
    With json_path, the rows are read from that file (the output of an earlier
    `remora_bench_cuda --json` run, possibly cut short: missing rows print as nan)."""
    if json_path:
        with open(json_path) as f:
            text = f.read()
    else:
        cmd = [binary, "--json", "--L", ",".join(map(str, Ls)), "--B", str(B), "--H", str(H),
               "--D", str(D), "--reps", str(reps), "--flash-B", str(flash_B), "--flash-H", str(flash_H),
               "--flash-D", ",".join(map(str, flash_Ds))] + (["--quick"] if quick else [])
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode == 77:
            sys.exit("remora_bench_cuda: " + p.stdout.strip())
        if p.returncode != 0:
            sys.exit(f"remora_bench_cuda failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        text = p.stdout
    rows = []
    for l in text.splitlines():
        if l.startswith("{"):
            try:
                rows.append(json.loads(l))
            except ValueError:  # a line cut off mid-write
                pass
    rsa = {(r["L"], r["path"]): r for r in rows if r["bench"] == "rsa_cuda"}
    flash = {(r["D"], r["L"], r["path"]): r for r in rows if r["bench"] == "rsa_flash"}
    return rsa, flash


def time_calls(fwd, fwd_bwd, reps, what):
    """Median ms of fwd() and fwd_bwd() (NaN where torch runs out of memory)."""
    import torch
    out = []
    for f in (fwd, fwd_bwd):
        try:
            torch.cuda.synchronize()
            f()  # warm-up
            torch.cuda.synchronize()
            ts = []
            for _ in range(reps):
                a = time.perf_counter()
                f()
                torch.cuda.synchronize()
                ts.append((time.perf_counter() - a) * 1e3)
            out.append(statistics.median(ts))
        except RuntimeError as e:  # out of memory at large L
            print(f"{what}: {str(e).splitlines()[0]}", file=sys.stderr)
            torch.cuda.empty_cache()
            out.append(float("nan"))
    return out


def timed_pair(forward, leaves, probe):
    """(fwd, fwd_bwd) for time_calls: forward() without gradients, and forward()
    with the backward of sum(forward() * probe) into the leaves."""
    import torch

    def fwd():
        with torch.no_grad():
            forward()

    def fwd_bwd():
        for t in leaves:
            t.grad = None
        (forward() * probe).sum().backward()

    return fwd, fwd_bwd


def time_torch_flash_peer(L, B, H, D, reps, variant):
    """The PyTorch peers of the flash table: 'eager' (composed RSA, TF32 allowed),
    'sdpa_f32' and 'sdpa_bf16' (causal SDPA alone). [fwd ms, fwd+bwd ms]."""
    import torch
    from torch_ref.rem import causal_mask, rsa_attention
    dev = torch.device("cuda")
    torch.manual_seed(1234)
    dt = torch.bfloat16 if variant == "sdpa_bf16" else torch.float32
    q, k, v = (torch.randn(B, H, L, D, device=dev, dtype=dt).requires_grad_() for _ in range(3))
    probe = torch.randn(B, H, L, D, device=dev, dtype=dt)
    leaves = [q, k, v]
    if variant == "eager":
        mask = causal_mask(L, L, device=dev)
        params = {n: torch.tensor(x, dtype=torch.float32, device=dev).requires_grad_()
                  for n, x in PARAMS.items()}
        leaves += list(params.values())

        def forward():
            return rsa_attention(q, k, v, SPEC, params["eta"], params["nu"], params["theta"],
                                 params["mu"], attn_mask=mask)
    else:
        def forward():
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = variant == "eager"
    try:
        out = time_calls(*timed_pair(forward, leaves, probe), reps, f"torch {variant} D={D} L={L}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    del q, k, v, probe, leaves
    torch.cuda.empty_cache()
    return out


def sdpa_function(torch):
    """(function, name) for the softmax part, or (None, reason)."""
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                "F.scaled_dot_product_attention")
    if hasattr(F, "_scaled_dot_product_attention"):
        # torch 1.13: _scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
        # need_attn_weights, is_causal) -> (out, weights)
        def f(q, k, v):
            return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, True)[0]
        return f, "F._scaled_dot_product_attention (torch 1.13, private)"
    return None, f"torch {torch.__version__} has no scaled_dot_product_attention"


def time_torch(L, B, H, D, reps, variant):
    import torch
    from torch_ref.rem import causal_mask, gate, num_heads, rem_matrix, rsa_attention
    dev = torch.device("cuda")
    torch.manual_seed(1234)
    q, k, v = (torch.randn(B, H, L, D, device=dev).requires_grad_() for _ in range(3))
    probe = torch.randn(B, H, L, D, device=dev)
    mask = causal_mask(L, L, device=dev)
    params = {n: torch.tensor(x, dtype=torch.float32, device=dev).requires_grad_()
              for n, x in PARAMS.items()}
    leaves = [q, k, v] + list(params.values())
    Hr = num_heads(SPEC)
    sdpa, _ = sdpa_function(torch)

    def forward():
        if variant == "eager":
            return rsa_attention(q, k, v, SPEC, params["eta"], params["nu"], params["theta"],
                                 params["mu"], attn_mask=mask)
        O = sdpa(q, k, v)
        P = rem_matrix(SPEC, params["eta"], params["nu"], params["theta"], L, L)
        Y = torch.matmul(P, v[:, :Hr])
        return torch.cat([gate(O[:, :Hr], Y, params["mu"].reshape(1, -1, 1, 1)), O[:, Hr:]], 1)

    out = time_calls(*timed_pair(forward, leaves, probe), reps, f"torch {variant} L={L}")
    del q, k, v, probe, mask, params, leaves
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remora-bench", default=os.path.join(ROOT, "build/tools/remora_bench_cuda"))
    ap.add_argument("--remora-json", default=None,
                    help="read Remora's rows from this file (remora_bench_cuda --json output) "
                         "instead of running --remora-bench")
    ap.add_argument("--L", default="1024,2048,4096")
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--D", type=int, default=64)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--xl", action="store_true", help="also run the XL training step benchmark")
    ap.add_argument("--xl-config", default=os.path.join(ROOT, "configs/xl.json"))
    ap.add_argument("--remora", default=os.path.join(ROOT, "build/cli/remora"))
    add_record_args(ap, "cuda")
    a = ap.parse_args()
    rec = Recorder("cuda", a, quick=a.quick)
    Ls = [int(x) for x in a.L.split(",")]
    B, H, D, reps = a.B, a.H, a.D, a.reps
    if a.quick:
        Ls, B, H, reps = [128], 2, 4, 2
    try:
        import torch
    except ImportError:
        sys.exit("bench_cuda: PyTorch is not importable by " + sys.executable)
    if not torch.cuda.is_available():
        sys.exit(f"bench_cuda: torch {torch.__version__} sees no CUDA device "
                 "(Debian's python3-torch is CPU-only; use a CUDA build of PyTorch)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    _, sdpa_name = sdpa_function(torch)
    have_sdpa = sdpa_function(torch)[0] is not None

    flash_B, flash_H, flash_Ds = (2, 4, (64, 128)) if a.quick else (8, 8, (64, 128))
    r, rf = run_remora(a.remora_bench, Ls, B, H, D, reps, a.quick, flash_B, flash_H, flash_Ds,
                       a.remora_json)
    rec.peers = {"torch": torch.__version__}
    rec.notes = {"gpu": torch.cuda.get_device_name(0)}
    finite = lambda x: round(x, 4) if x == x and abs(x) != float("inf") else None  # noqa: E731 (NaN: no row)
    print(f"RSA attention, f32, B={B} H={H} D={D}, causal, 4 REM heads; "
          f"GPU {torch.cuda.get_device_name(0)}; torch {torch.__version__}; sdpa: {sdpa_name}")
    print(f"{'L':>6} {'path':>16} {'fwd ms':>10} {'fwd+bwd ms':>11} {'fused vs it (fwd+bwd)':>22}")
    for L in Ls:
        rows = []
        for path in ("fused", "composed"):
            x = r.get((L, path))
            if x:
                rows.append(("remora " + path, x["fwd_ms"], x["fwd_bwd_ms"]))
        rows.append(("torch eager",) + tuple(time_torch(L, B, H, D, reps, "eager")))
        if have_sdpa:
            rows.append(("torch sdpa",) + tuple(time_torch(L, B, H, D, reps, "sdpa")))
        fused = r.get((L, "fused"), {}).get("fwd_bwd_ms", float("nan"))
        for name, f, fb in rows:
            ratio = fb / fused if fused > 0 and fb > 0 else float("nan")
            print(f"{L:6d} {name:>16} {f:10.3f} {fb:11.3f} {ratio:21.2f}x")
            rec.row(part="rsa", B=B, H=H, D=D, L=L, row=name, fwd_ms=finite(f), fwd_bwd_ms=finite(fb))
    if not have_sdpa:
        print(f"(no SDPA row: {sdpa_name})")

    # The tensor-core kernels against their peers (forward + backward).
    print()
    print(f"Fused RSA attention on tensor cores vs PyTorch, B={flash_B} H={flash_H} (4 REM heads), "
          f"causal; ratio = peer ms / remora flash ms (targets: >= 3 vs eager RSA, >= 0.6 vs sdpa)")
    print(f"{'D':>4} {'L':>6} {'row':>17} {'fwd ms':>10} {'fwd+bwd ms':>11} {'f+b TFLOP/s':>12} "
          f"{'ratio (f+b)':>12}")
    sdpa_ok = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    for Df in flash_Ds:
        for L in Ls:
            flop_fb = 2.5 * 4.0 * flash_B * flash_H * L * L * Df / 2
            rows = []
            for path in ("flash", "reference"):
                x = rf.get((Df, L, path))
                if x:
                    name = "remora " + path + ("" if path != "flash" or x.get("tensor_core_launches", 0) > 0
                                               else " (FELL BACK)")
                    rows.append((name, x["fwd_ms"], x["fwd_bwd_ms"]))
            peers = [("eager", "torch eager RSA")]
            if sdpa_ok:
                peers += [("sdpa_f32", "torch sdpa f32"), ("sdpa_bf16", "torch sdpa bf16")]
            for variant, name in peers:
                rows.append((name,) + tuple(time_torch_flash_peer(L, flash_B, flash_H, Df, reps, variant)))
            ours = rf.get((Df, L, "flash"), {}).get("fwd_bwd_ms", float("nan"))
            for name, f, fb in rows:
                ratio = fb / ours if ours > 0 and fb > 0 else float("nan")
                tfl = flop_fb / (fb * 1e-3) / 1e12 if fb > 0 else float("nan")
                print(f"{Df:4d} {L:6d} {name:>17} {f:10.3f} {fb:11.3f} {tfl:12.2f} {ratio:11.2f}x")
                rec.row(part="flash", B=flash_B, H=flash_H, D=Df, L=L, row=name, fwd_ms=finite(f),
                        fwd_bwd_ms=finite(fb), tflops=finite(tfl))
    if not sdpa_ok:
        print(f"(no SDPA rows in the flash table: torch {torch.__version__} has no "
              "F.scaled_dot_product_attention)")
    rec.write()
    if a.xl:
        print()
        subprocess.run([sys.executable, os.path.join(HERE, "bench_xl_train.py"), "--device", "cuda",
                        "--config", a.xl_config, "--remora", a.remora], check=True)


if __name__ == "__main__":
    main()
