#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/golden_nn.safetensors: PyTorch 1.13 references for the nn
layers and optimizers (tests/test_nn.cpp, tests/test_optim.cpp).

Run with Debian's python3-torch:  /usr/bin/python3 tools/goldens/make_nn_goldens.py

Everything is float64. For each layer <m>:
  <m>.state.<name>   the torch module's state_dict (Remora loads it)
  <m>.input...       inputs (ids / masks as I64; bool masks as 0/1 I64)
  <m>.output         forward output (eval mode)
  <m>.probe          the loss is sum(output * probe)
  <m>.grad.<name>    gradient of every parameter, <m>.grad.input* of the inputs
Optimizers: optim.init.<j>, optim.grad.<s>.<j> (absent = no grad that step),
  <opt>.param.<s>.<j> after step s: STEPS steps, LONG_STEPS for LONG_OPTIMIZERS
  (whose gradients after the first STEPS are drawn last). clip.*: clip_grad_norm_
  cases.
Bump VERSION when the layout changes (the C++ test checks it).
"""
import inspect
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402

VERSION = "1"
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "tests", "data",
                   "golden_nn.safetensors")

tensors = {}  # name -> tensor (insertion order kept)


def add_tensor(tensors, name, t):
    """Stores a contiguous copy of t, detached, under a name not yet in tensors
    (bool as int64; float64 and int64 only)."""
    assert name not in tensors, name
    t = t.detach()
    if t.dtype == torch.bool:
        t = t.to(torch.int64)
    assert t.dtype in (torch.float64, torch.int64), (name, t.dtype)
    tensors[name] = t.contiguous().clone()


def write_golden(path, tensors, fmt, version, generator):
    """Writes tensors to path with the golden metadata and says how much it wrote."""
    meta = {"format": fmt, "version": version, "generator": generator, "torch": torch.__version__}
    write_safetensors(path, tensors, meta)
    print(f"wrote {len(tensors)} tensors, {os.path.getsize(path)} bytes to {os.path.normpath(path)}")


def put(name, t):
    add_tensor(tensors, name, t)


def record_module(prefix, module, inputs, run, randomize=True):
    """inputs: dict name -> tensor (those named input* and floating get gradients)."""
    module.double()
    if randomize:  # random values everywhere, so every loaded tensor matters
        with torch.no_grad():
            for n, p in module.named_parameters():
                p.copy_(torch.randn_like(p) * 0.5)
    for n, t in module.state_dict().items():
        put(f"{prefix}.state.{n}", t)
    for n, t in inputs.items():
        put(f"{prefix}.{n}", t)
        if n.startswith("input") and t.is_floating_point():
            t.requires_grad_(True)
    out = run(module, inputs)
    probe = torch.randn_like(out)
    (out * probe).sum().backward()
    put(f"{prefix}.output", out)
    put(f"{prefix}.probe", probe)
    for n, p in module.named_parameters():
        put(f"{prefix}.grad.{n}", p.grad)
    for n, t in inputs.items():
        if t.requires_grad:
            put(f"{prefix}.grad.{n}", t.grad)


class FeedForward(nn.Module):
    def __init__(self, d, d_inner, act):
        super().__init__()
        self.fc1 = nn.Linear(d, d_inner)
        self.fc2 = nn.Linear(d_inner, d)
        self.dropout = nn.Dropout(0.3)
        self.act = act

    def forward(self, x):
        h = self.fc1(x)
        h = F.relu(h) if self.act == "relu" else F.gelu(h)
        return self.fc2(self.dropout(h))


def layers():
    f64 = torch.float64
    # Linear [B, L, in] -> [B, L, out]
    record_module("linear", nn.Linear(5, 4), {"input": torch.randn(3, 2, 5, dtype=f64)},
                  lambda m, i: m(i["input"]), randomize=False)
    # Embedding with padding_idx: ids hit the padding row and repeat rows.
    emb = nn.Embedding(7, 4, padding_idx=2)
    ids = torch.tensor([[0, 2, 5, 5, 1], [2, 6, 3, 0, 2]], dtype=torch.int64)
    record_module("embedding", emb, {"input": ids}, lambda m, i: m(i["input"]), randomize=False)
    # LayerNorm with non-trivial weight and bias.
    record_module("layernorm", nn.LayerNorm(6, eps=1e-5),
                  {"input": torch.randn(2, 3, 6, dtype=f64) * 2 + 0.5},
                  lambda m, i: m(i["input"]))
    for act in ("relu", "gelu"):
        ff = FeedForward(6, 10, act).eval()
        record_module(f"ffn_{act}", ff, {"input": torch.randn(2, 3, 6, dtype=f64)},
                      lambda m, i: m(i["input"]), randomize=False)

    # Self-attention with a causal float mask and a key padding mask.
    B, L, d, H = 2, 5, 8, 2
    mha = nn.MultiheadAttention(d, H, dropout=0.1, batch_first=True).eval()
    causal = torch.triu(torch.full((L, L), float("-inf"), dtype=f64), diagonal=1)
    kpm = torch.tensor([[0, 0, 0, 0, 1], [0, 0, 1, 0, 1]], dtype=torch.bool)
    record_module("mha_self", mha,
                  {"input": torch.randn(B, L, d, dtype=f64), "attn_mask": causal,
                   "key_padding_mask": kpm},
                  lambda m, i: m(i["input"], i["input"], i["input"], attn_mask=i["attn_mask"],
                                 key_padding_mask=i["key_padding_mask"], need_weights=False)[0])
    # Cross-attention (separate q, k, v tensors) with a boolean attn_mask.
    Lq, Lk = 3, 5
    mha2 = nn.MultiheadAttention(d, 4, batch_first=True).eval()
    bmask = torch.tensor([[0, 1, 0, 0, 1], [0, 0, 0, 1, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    kpm2 = torch.tensor([[0, 0, 0, 1, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    record_module("mha_cross", mha2,
                  {"input_q": torch.randn(B, Lq, d, dtype=f64),
                   "input_k": torch.randn(B, Lk, d, dtype=f64),
                   "input_v": torch.randn(B, Lk, d, dtype=f64),
                   "attn_mask": bmask, "key_padding_mask": kpm2},
                  lambda m, i: m(i["input_q"], i["input_k"], i["input_v"],
                                 attn_mask=i["attn_mask"], key_padding_mask=i["key_padding_mask"],
                                 need_weights=False)[0])
    # No biases, no masks.
    mha3 = nn.MultiheadAttention(d, 2, bias=False, batch_first=True).eval()
    record_module("mha_nobias", mha3, {"input": torch.randn(B, L, d, dtype=f64)},
                  lambda m, i: m(i["input"], i["input"], i["input"], need_weights=False)[0])


OPTIMIZERS = {
    # name: (constructor, hyper-parameters; tests/test_optim.cpp uses the same)
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0,
                                              weight_decay=0.01, nesterov=True),
    "sgd_dampening": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.1),
    "sgd_plain": lambda p: torch.optim.SGD(p, lr=0.2),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.95), eps=1e-6,
                                       weight_decay=0.05),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                         weight_decay=0.1),
}
STEPS = 5


def radam_decoupled(p, lr, weight_decay):
    """torch.optim.RAdam(decoupled_weight_decay=True): torch >= 2.1's own, or on
    torch 1.13 (no such argument) a RAdam without weight decay whose step first
    multiplies each parameter that has a gradient by 1 - lr * weight_decay, which
    is what torch 2.x's step does."""
    if "decoupled_weight_decay" in inspect.signature(torch.optim.RAdam).parameters:
        return torch.optim.RAdam(p, lr=lr, weight_decay=weight_decay, decoupled_weight_decay=True)
    opt = torch.optim.RAdam(p, lr=lr, weight_decay=0)
    plain_step = opt.step

    def step(closure=None):
        with torch.no_grad():
            for group in opt.param_groups:
                for q in group["params"]:
                    if q.grad is not None:
                        q.mul_(1 - group["lr"] * weight_decay)
        return plain_step(closure)

    opt.step = step
    return opt


# RAdam's rectified step starts at step 6 with beta2 = 0.999 (rho_t > 5); the
# first five are its momentum steps, so these run LONG_STEPS.
LONG_OPTIMIZERS = {
    "radam": lambda p: torch.optim.RAdam(p, lr=0.01, weight_decay=0.1),
    "radam_decoupled": lambda p: radam_decoupled(p, lr=0.01, weight_decay=0.1),
}
LONG_STEPS = 10


def run_optimizer(name, make, init, grads):
    params = [t.clone().requires_grad_(True) for t in init]
    opt = make(params)
    for s in range(len(grads)):
        opt.zero_grad(set_to_none=True)
        for p, g in zip(params, grads[s]):
            p.grad = None if g is None else g.clone()
        opt.step()
        for j, p in enumerate(params):
            put(f"{name}.param.{s}.{j}", p)


def optimizers():
    f64 = torch.float64
    shapes = [(3, 4), (4,), (2, 2, 2)]
    init = [torch.randn(*s, dtype=f64) for s in shapes]
    grads = [[torch.randn(*s, dtype=f64) for s in shapes] for _ in range(STEPS)]
    grads[2][1] = None  # parameter 1 has no gradient at step 2: skipped
    for j, t in enumerate(init):
        put(f"optim.init.{j}", t)
    for s in range(STEPS):
        for j, g in enumerate(grads[s]):
            if g is not None:
                put(f"optim.grad.{s}.{j}", g)
    for name, make in OPTIMIZERS.items():
        run_optimizer(name, make, init, grads)

    # clip_grad_norm_: one case that clips, one that does not.
    cg = [torch.randn(*s, dtype=f64) for s in shapes]
    for j, g in enumerate(cg):
        put(f"clip.grad.{j}", g)
    for case, max_norm in (("clip", 0.5), ("noclip", 100.0)):
        params = [torch.zeros(*s, dtype=f64, requires_grad=True) for s in shapes]
        for p, g in zip(params, cg):
            p.grad = g.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm)
        put(f"clip.{case}.total_norm", total.reshape(1))
        for j, p in enumerate(params):
            put(f"clip.{case}.grad.{j}", p.grad)

    # The longer runs: the same first STEPS gradients, then more drawn here (after
    # everything above, which so keeps its values).
    more = [[torch.randn(*s, dtype=f64) for s in shapes] for _ in range(LONG_STEPS - STEPS)]
    for s, gs in enumerate(more, start=STEPS):
        for j, g in enumerate(gs):
            put(f"optim.grad.{s}.{j}", g)
    for name, make in LONG_OPTIMIZERS.items():
        run_optimizer(name, make, init, grads + more)


def main():
    torch.manual_seed(1234)
    layers()
    optimizers()
    write_golden(OUT, tensors, "remora-golden-nn", VERSION, "tools/goldens/make_nn_goldens.py")


if __name__ == "__main__":
    sys.exit(main())
