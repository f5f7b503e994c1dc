#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/golden_ops.safetensors: PyTorch reference values for Remora's ops.

Run with Debian's torch:   /usr/bin/python3 tools/goldens/make_goldens.py

For every case C the file holds
  C.in.K    the inputs (float inputs are differentiated; I64 = targets, indices, masks)
  C.out     the forward output
  C.probe   a random tensor of C.out's shape
  C.grad.K  d sum(C.out * C.probe) / d C.in.K for every float input K
and "__metadata__" = {"format": "remora-golden", "version": GOLDEN_VERSION,
"torch": torch.__version__, "cases": "name1,name2,..."}.

tests/test_golden.cpp rebuilds each case with Remora's ops. Adding a case means
adding it here AND there; bump GOLDEN_VERSION (and the constant in the test)
when the meaning of existing entries changes. The safetensors format is written
by hand (no `safetensors` package needed), docs/math.md#checkpoints-the-safetensors-format.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402

GOLDEN_VERSION = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_PATH = os.path.join(ROOT, "tests", "data", "golden_ops.safetensors")

f64 = torch.float64
f32 = torch.float32

CASES = []  # (name, {key: tensor}, fn(*inputs in order) -> out)


def case(name, inputs, fn):
    CASES.append((name, inputs, fn))


def randn(*shape, dt=f64):
    return torch.randn(*shape, dtype=dt)


def pos(*shape, dt=f64, lo=0.5, hi=2.0):
    """Uniform in [lo, hi): away from the poles/kinks of log, sqrt, div, pow."""
    return lo + (hi - lo) * torch.rand(*shape, dtype=dt)


def away_from_zero(*shape, dt=f64, gap=0.1):
    """N(0,1) with |x| >= gap, so relu's kink at 0 is never hit."""
    x = torch.randn(*shape, dtype=dt)
    return torch.where(x.abs() < gap, torch.sign(x + 1e-30) * gap + x, x)


def ids(high, *shape):
    return torch.randint(0, high, shape, dtype=torch.int64)


def mask(*shape, p=0.4):
    return (torch.rand(*shape) < p).to(torch.int64)


def targets(n, c, ignore=()):
    t = torch.randint(0, c, (n,), dtype=torch.int64)
    for i in ignore:
        t[i] = -100
    return t


def build_cases():
    # ---- elementwise with broadcasting ----
    for dt, sfx in ((f64, ""), (f32, "_f32")):
        case("add_bcast" + sfx, {"a": randn(3, 4, dt=dt), "b": randn(4, dt=dt)}, lambda a, b: a + b)
        case("mul_bcast" + sfx, {"a": randn(2, 3, 4, dt=dt), "b": randn(3, 1, dt=dt)},
             lambda a, b: a * b)
    case("add_bcast_both", {"a": randn(2, 1, 4), "b": randn(3, 1)}, lambda a, b: a + b)
    case("sub_bcast", {"a": randn(3, 1), "b": randn(1, 4)}, lambda a, b: a - b)
    case("sub_bcast_rank", {"a": randn(4), "b": randn(2, 3, 4)}, lambda a, b: a - b)
    case("div_bcast", {"a": randn(3, 4), "b": pos(4)}, lambda a, b: a / b)
    case("div_bcast_num", {"a": randn(2, 1, 3), "b": pos(2, 4, 1)}, lambda a, b: a / b)
    case("scalar_ops", {"x": randn(3, 4)}, lambda x: (2.5 * x - 1.0) / 4.0 + 3.0 - x * 0.5)

    # ---- unary ----
    case("pow_2_5", {"x": pos(3, 4)}, lambda x: x.pow(2.5))
    case("pow_3", {"x": randn(3, 4)}, lambda x: x.pow(3.0))
    case("pow_neg_half", {"x": pos(3, 4)}, lambda x: x.pow(-0.5))
    case("exp", {"x": randn(3, 4)}, torch.exp)
    case("log", {"x": pos(3, 4, lo=0.1, hi=5.0)}, torch.log)
    case("sqrt", {"x": pos(3, 4, lo=0.1, hi=5.0)}, torch.sqrt)
    case("tanh", {"x": 2 * randn(3, 4)}, torch.tanh)
    case("sigmoid", {"x": 2 * randn(3, 4)}, torch.sigmoid)
    case("relu", {"x": away_from_zero(3, 4)}, torch.relu)
    case("gelu", {"x": 2 * randn(3, 5)}, lambda x: F.gelu(x, approximate="none"))
    case("gelu_f32", {"x": 2 * randn(3, 5, dt=f32)}, lambda x: F.gelu(x, approximate="none"))

    # ---- reductions ----
    case("sum_all", {"x": randn(2, 3, 4)}, lambda x: x.sum())
    case("sum_dim1", {"x": randn(2, 3, 4)}, lambda x: x.sum(dim=1))
    case("sum_dims02_keepdim", {"x": randn(2, 3, 4)}, lambda x: x.sum(dim=(0, 2), keepdim=True))
    case("mean_all", {"x": randn(2, 3, 4)}, lambda x: x.mean())
    case("mean_dim_last", {"x": randn(2, 3, 4)}, lambda x: x.mean(dim=-1))
    case("mean_dims01_keepdim", {"x": randn(2, 3, 4)}, lambda x: x.mean(dim=(0, 1), keepdim=True))
    case("max_dim1", {"x": randn(3, 5)}, lambda x: x.max(dim=1).values)
    case("max_dim0_keepdim", {"x": randn(2, 3, 4)}, lambda x: x.max(dim=0, keepdim=True).values)

    # ---- linear algebra ----
    case("matmul_2d", {"a": randn(3, 4), "b": randn(4, 5)}, torch.matmul)
    case("matmul_batched", {"a": randn(2, 3, 4), "b": randn(2, 4, 5)}, torch.matmul)
    case("matmul_batched_f32", {"a": randn(2, 3, 4, dt=f32), "b": randn(2, 4, 5, dt=f32)},
         torch.matmul)
    case("matmul_bcast_batch", {"a": randn(2, 1, 3, 4), "b": randn(3, 4, 2)}, torch.matmul)
    case("matmul_bcast_2d", {"a": randn(2, 3, 4), "b": randn(4, 5)}, torch.matmul)
    # a [4, 3] and b [5, 4] enter as transposed views
    case("matmul_tviews", {"a": randn(4, 3), "b": randn(5, 4)}, lambda a, b: a.t() @ b.t())
    case("linear", {"x": randn(2, 3, 4), "w": randn(5, 4), "b": randn(5)}, F.linear)

    # ---- shape ops ----
    case("transpose_contig", {"x": randn(2, 3, 4)}, lambda x: x.transpose(0, 2).contiguous())
    case("permute_contig", {"x": randn(2, 3, 4)}, lambda x: x.permute(2, 0, 1).contiguous())
    case("reshape_view", {"x": randn(2, 3, 4)}, lambda x: x.transpose(1, 2).reshape(2, 12))
    case("slice_dim0", {"x": randn(5, 6)}, lambda x: x[1:4])
    case("slice_step", {"x": randn(5, 6)}, lambda x: x[:, 1:6:2])
    case("cat_dim1", {"a": randn(2, 3), "b": randn(2, 2), "c": randn(2, 1)},
         lambda a, b, c: torch.cat([a, b, c], dim=1))
    case("cat_dim0", {"a": randn(1, 3, 2), "b": randn(2, 3, 2)},
         lambda a, b: torch.cat([a, b], dim=0))
    case("stack_dim0", {"a": randn(2, 3), "b": randn(2, 3), "c": randn(2, 3)},
         lambda a, b, c: torch.stack([a, b, c], dim=0))
    case("stack_dim_last", {"a": randn(2, 3), "b": randn(2, 3)},
         lambda a, b: torch.stack([a, b], dim=-1))
    case("index_select_dim0", {"x": randn(5, 3), "idx": torch.tensor([0, 2, 2, 4, 1])},
         lambda x, idx: x.index_select(0, idx))
    case("index_select_dim1", {"x": randn(2, 5, 3), "idx": torch.tensor([4, 0, 4])},
         lambda x, idx: x.index_select(1, idx))
    case("embedding", {"w": randn(6, 3), "ids": torch.tensor([[1, 3, 3, 0], [5, 1, 2, 3]])},
         lambda w, ids: F.embedding(ids, w))
    case("embedding_pad", {"w": randn(6, 3), "ids": torch.tensor([[1, 0, 3, 0], [5, 1, 0, 3]])},
         lambda w, ids: F.embedding(ids, w, padding_idx=0))
    case("masked_fill", {"x": randn(3, 4), "mask": mask(3, 4)},
         lambda x, mask: x.masked_fill(mask.bool(), -2.5))
    case("masked_fill_bcast", {"x": randn(2, 3, 4), "mask": mask(3, 1)},
         lambda x, mask: x.masked_fill(mask.bool(), 0.75))
    case("where", {"cond": mask(3, 4, p=0.5), "a": randn(3, 4), "b": randn(4)},
         lambda cond, a, b: torch.where(cond.bool(), a, b))

    # ---- nn ops ----
    case("softmax_last", {"x": 2 * randn(3, 5)}, lambda x: F.softmax(x, dim=-1))
    case("softmax_last_f32", {"x": 2 * randn(3, 5, dt=f32)}, lambda x: F.softmax(x, dim=-1))
    case("softmax_dim0", {"x": 2 * randn(3, 4, 2)}, lambda x: F.softmax(x, dim=0))
    case("log_softmax_last", {"x": 2 * randn(3, 5)}, lambda x: F.log_softmax(x, dim=-1))
    case("log_softmax_dim1", {"x": 2 * randn(2, 4, 3)}, lambda x: F.log_softmax(x, dim=1))
    for dt, sfx in ((f64, ""), (f32, "_f32")):
        case("layer_norm" + sfx, {"x": 1.5 * randn(2, 3, 8, dt=dt) + 0.3,
                                  "w": 1 + 0.3 * randn(8, dt=dt), "b": 0.3 * randn(8, dt=dt)},
             lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5))
        case("cross_entropy_mean" + sfx, {"logits": 2 * randn(6, 5, dt=dt),
                                          "target": targets(6, 5, ignore=(1, 4))},
             lambda logits, target: F.cross_entropy(logits, target, ignore_index=-100,
                                                    reduction="mean"))
    case("cross_entropy_sum", {"logits": 2 * randn(6, 5), "target": targets(6, 5, ignore=(2,))},
         lambda logits, target: F.cross_entropy(logits, target, reduction="sum"))
    case("cross_entropy_none", {"logits": 2 * randn(6, 5), "target": targets(6, 5, ignore=(0,))},
         lambda logits, target: F.cross_entropy(logits, target, reduction="none"))
    # Remora takes logits [..., C] with target [...]; PyTorch wants [N, C], so flatten.
    case("cross_entropy_3d", {"logits": 2 * randn(2, 3, 5),
                              "target": targets(6, 5, ignore=(3,)).reshape(2, 3)},
         lambda logits, target: F.cross_entropy(logits.reshape(-1, 5), target.reshape(-1)))

    # ---- composites ----
    # (a) MLP block: y = x + W2 gelu(W1 LN(x) + b1) + b2; x [B, T, D], hidden H = 2D.
    def mlp(x, ln_w, ln_b, w1, b1, w2, b2):
        h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b, eps=1e-5)
        h = F.gelu(F.linear(h, w1, b1), approximate="none")
        return x + F.linear(h, w2, b2)

    for dt, sfx in ((f64, ""), (f32, "_f32")):
        D, H = 6, 12
        case("mlp_block" + sfx, {"x": randn(2, 3, D, dt=dt), "ln_w": 1 + 0.2 * randn(D, dt=dt),
                                 "ln_b": 0.2 * randn(D, dt=dt),
                                 "w1": randn(H, D, dt=dt) / math.sqrt(D),
                                 "b1": 0.1 * randn(H, dt=dt),
                                 "w2": randn(D, H, dt=dt) / math.sqrt(H),
                                 "b2": 0.1 * randn(D, dt=dt)}, mlp)

    # (b) one head of causal attention, then cross-entropy of the output rows
    # (as logits over d classes) against targets. q, k, v [B, T, d].
    def attn(q, k, v, target):
        T, d = q.shape[-2], q.shape[-1]
        s = q @ k.transpose(-2, -1) / math.sqrt(d)                       # [B, T, T]
        causal = torch.triu(torch.ones(T, T, dtype=torch.int64), diagonal=1).bool()
        p = F.softmax(s.masked_fill(causal, float("-inf")), dim=-1)
        o = p @ v                                                         # [B, T, d]
        return F.cross_entropy(o.reshape(-1, d), target.reshape(-1), ignore_index=-100)

    for dt, sfx in ((f64, ""), (f32, "_f32")):
        B, T, d = 2, 5, 4
        tgt = targets(B * T, d, ignore=(3, 7)).reshape(B, T)
        case("causal_attention" + sfx, {"q": randn(B, T, d, dt=dt), "k": randn(B, T, d, dt=dt),
                                        "v": 2 * randn(B, T, d, dt=dt), "target": tgt}, attn)

    # ---- ops on non-contiguous views, reused inputs, conversions ----
    case("reuse_input", {"x": randn(3, 4), "y": randn(3, 4)},
         lambda x, y: x * x + x * y - y / (1.5 + x.tanh()))
    case("scalar_div_tensor", {"x": pos(3, 4)}, lambda x: 2.0 / x)
    case("tanh_on_tview", {"x": randn(4, 3)}, lambda x: torch.tanh(x.t()))
    case("add_tviews", {"a": randn(4, 3), "b": randn(3, 4)}, lambda a, b: a.t() + b)
    case("sum_on_permuted", {"x": randn(2, 3, 4)}, lambda x: x.permute(2, 0, 1).sum(dim=(1,)))
    case("softmax_on_tview", {"x": 2 * randn(5, 3)}, lambda x: F.softmax(x.t(), dim=-1))
    case("layer_norm_on_tview", {"x": randn(2, 8, 3), "w": 1 + 0.3 * randn(8),
                                 "b": 0.3 * randn(8)},
         lambda x, w, b: F.layer_norm(x.transpose(-1, -2), (8,), w, b, eps=1e-5))
    case("cross_entropy_on_tview", {"logits": 2 * randn(5, 6),
                                    "target": targets(6, 5, ignore=(4,))},
         lambda logits, target: F.cross_entropy(logits.t(), target))
    case("matmul_expanded", {"a": randn(3, 1), "b": randn(4, 2)},
         lambda a, b: a.expand(3, 4) @ b)
    case("softmax_large_logits", {"x": 40 * randn(3, 6)}, lambda x: F.softmax(x, dim=-1))
    case("log_softmax_large_logits", {"x": 40 * randn(3, 6)},
         lambda x: F.log_softmax(x, dim=-1))
    case("where_bcast_cond", {"cond": mask(3, 1, p=0.5), "a": randn(2, 3, 4), "b": randn(1, 4)},
         lambda cond, a, b: torch.where(cond.bool(), a, b))
    case("to_f32", {"x": randn(3, 4)}, lambda x: x.to(torch.float32))
    case("chunk_cat", {"x": randn(2, 6)},
         lambda x: torch.cat(list(reversed(x.chunk(3, dim=1))), dim=0))

    # ---- more unary/binary ops, and points where a formula needs care ----
    with_zeros = randn(3, 4)
    with_zeros[0, 1] = with_zeros[2, 3] = 0.0
    case("abs", {"x": with_zeros.clone()}, torch.abs)  # d|x|/dx = sign(x) = 0 at 0
    case("pow_0", {"x": with_zeros.clone()}, lambda x: x.pow(0.0))  # constant: gradient 0, also at 0
    case("pow_1", {"x": with_zeros.clone()}, lambda x: x.pow(1.0))
    case("pow_2", {"x": with_zeros.clone()}, lambda x: x.pow(2.0))
    case("maximum", {"a": randn(3, 4), "b": randn(4)}, torch.maximum)
    case("minimum", {"a": randn(2, 1, 4), "b": randn(3, 4)}, torch.minimum)
    case("neg", {"x": randn(3, 4)}, torch.neg)
    case("layer_norm_noaffine", {"x": randn(3, 7)},
         lambda x: F.layer_norm(x, (7,), eps=1e-5))
    case("cross_entropy_ignore2", {"logits": 2 * randn(7, 4), "target": targets(7, 4)},
         lambda logits, target: F.cross_entropy(logits, target, ignore_index=2))
    # 1-D matmul operands are promoted as in NumPy
    case("matmul_vec_mat", {"a": randn(4), "b": randn(4, 5)}, lambda a, b: a @ b)
    case("matmul_bmat_vec", {"a": randn(2, 3, 4), "b": randn(4)}, lambda a, b: a @ b)
    case("matmul_vec_bmat", {"a": randn(3), "b": randn(2, 3, 4)}, lambda a, b: a @ b)
    case("matmul_dot", {"a": randn(5), "b": randn(5)}, lambda a, b: a @ b)


DTYPES = {torch.float64: ("F64", "<f8"), torch.float32: ("F32", "<f4"),
          torch.int64: ("I64", "<i8")}


def main():
    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    build_cases()
    names = [c[0] for c in CASES]
    assert len(set(names)) == len(names), "duplicate case names"
    out_tensors = []
    for name, inputs, fn in CASES:
        assert "," not in name and "." not in name
        leaves = {}
        for k, v in inputs.items():
            v = v.detach().clone()
            if v.is_floating_point():
                v.requires_grad_(True)
            leaves[k] = v
        out = fn(*leaves.values())  # positional, in input order
        probe = torch.randn(out.shape, dtype=out.dtype)
        floats = [k for k, v in leaves.items() if v.is_floating_point()]
        grads = torch.autograd.grad((out * probe).sum(), [leaves[k] for k in floats],
                                    allow_unused=True)
        for k, v in leaves.items():
            out_tensors.append((f"{name}.in.{k}", v))
        out_tensors.append((f"{name}.out", out))
        out_tensors.append((f"{name}.probe", probe))
        for k, g in zip(floats, grads):
            if g is None:
                g = torch.zeros_like(leaves[k])
            assert torch.isfinite(g).all(), f"{name}: non-finite gradient for {k}"
            out_tensors.append((f"{name}.grad.{k}", g))
        assert torch.isfinite(out).all(), f"{name}: non-finite output"
    metadata = {"format": "remora-golden", "version": GOLDEN_VERSION,
                "torch": torch.__version__, "cases": ",".join(names)}
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    write_safetensors(OUT_PATH, out_tensors, metadata)
    print(f"wrote {OUT_PATH}: {len(CASES)} cases, {len(out_tensors)} tensors, "
          f"{os.path.getsize(OUT_PATH)} bytes (torch {torch.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
