#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/golden_rsa.safetensors: PyTorch 1.13 references for the
nn::RSAAttention layer (tests/test_rsa_module.cpp).

Run with Debian's python3-torch:  /usr/bin/python3 tools/goldens/make_rsa_goldens.py

The layer, written here in PyTorch (RSAAttentionRef), is torch.nn.MultiheadAttention's
parameters (in_proj_weight [3d, d], in_proj_bias [3d], out_proj.weight/bias) plus the
REM parameters of docs/math.md#recurrence-encoding-matrices-rem (rem.eta, rem.nu, rem.theta, rem.mu):
  q, k, v = in_proj(query), in_proj(key), in_proj(value)   (rows 0..d, d..2d, 2d..3d)
  heads [B, H, L, D], scale 1/sqrt(D), tools/torch_ref/rem.py's rsa_attention
  (causal: additive mask over j > (Lk - Lq) + i; REM distance n = (Lk - Lq) + i - j),
  heads concatenated, out_proj. Dropout 0 (eval).
Before recording, each case is checked against torch.nn.MultiheadAttention with the
gate shut (mu = -1e4, so sigmoid(mu) = 0): this pins the projection / head layout.

Everything is float64. For each case <c>:
  <c>.spec            I64 [regular, cyclic, dilated_regular, dilated_cyclic, masked,
                      max_distance, dilations...] (the C++ test checks its own spec)
  <c>.config          I64 [d, H, gate_is_layer, bias, causal]
  <c>.state.<name>    the state dict under Remora's names
  <c>.input...        inputs (input, or input_q/input_k/input_v); masks as 0/1 I64
  <c>.output          forward output
  <c>.probe           the loss is sum(output * probe)
  <c>.grad.<name>     gradient of every parameter, <c>.grad.input* of the inputs
Cases: causal (every REM kind, 6 of 8 heads), unmasked (bidirectional REM, key
padding, gate "layer"), cross (Lq < Lk, causal), nobias_maxdist (no biases, all
heads REM, max_distance), long_causal (L = 260, key padding).
Bump VERSION when the layout or the cases change (the C++ test checks it).
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
from make_nn_goldens import add_tensor, write_golden  # noqa: E402
from torch_ref.rem import causal_mask, normalize_spec, num_heads, rsa_attention  # noqa: E402

VERSION = "1"
OUT = os.path.join(HERE, "..", "tests", "data", "golden_rsa.safetensors")
f64 = torch.float64

tensors = {}  # name -> tensor (insertion order kept)


def put(name, t):
    add_tensor(tensors, name, t)


class RemParams(nn.Module):
    def __init__(self, spec, gate):
        super().__init__()
        s = normalize_spec(spec)
        n_eta = s["regular"] + s["dilated_regular"]
        n_cyc = s["cyclic"] + s["dilated_cyclic"]
        # Registration order = Remora's: eta, nu, theta, mu (absent kinds are absent).
        if n_eta:
            self.eta = nn.Parameter(torch.empty(n_eta, dtype=f64))
        if n_cyc:
            self.nu = nn.Parameter(torch.empty(n_cyc, dtype=f64))
            self.theta = nn.Parameter(torch.empty(n_cyc, dtype=f64))
        self.mu = nn.Parameter(torch.empty(1 if gate == "layer" else num_heads(s), dtype=f64))

    def get(self, name):
        return getattr(self, name, None)


class RSAAttentionRef(nn.Module):
    """An RSA attention layer in PyTorch, with Remora's parameter names."""

    def __init__(self, d, H, spec, gate="head", bias=True):
        super().__init__()
        self.d, self.H, self.spec = d, H, normalize_spec(spec)
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d, dtype=f64))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * d, dtype=f64)) if bias else None
        self.out_proj = nn.Linear(d, d, bias=bias).double()
        self.rem = RemParams(spec, gate)

    def forward(self, query, key, value, key_padding_mask=None, causal=False, mu=None):
        d, H = self.d, self.H
        D = d // H
        B, Lq, _ = query.shape
        Lk = key.shape[1]
        W, b = self.in_proj_weight, self.in_proj_bias
        bs = [None] * 3 if b is None else [b[i * d:(i + 1) * d] for i in range(3)]
        q = F.linear(query, W[:d], bs[0])
        k = F.linear(key, W[d:2 * d], bs[1])
        v = F.linear(value, W[2 * d:], bs[2])

        def heads(x, L):
            return x.reshape(B, L, H, D).permute(0, 2, 1, 3)

        q, k, v = heads(q, Lq), heads(k, Lk), heads(v, Lk)
        mask = causal_mask(Lq, Lk, dtype=f64) if causal else None
        r = self.rem
        o = rsa_attention(q, k, v, self.spec, r.get("eta"), r.get("nu"), r.get("theta"),
                          r.mu if mu is None else mu, attn_mask=mask,
                          key_padding=key_padding_mask, scale=1.0 / math.sqrt(D))
        o = o.permute(0, 2, 1, 3).reshape(B, Lq, d)
        return self.out_proj(o)


def randomize(m, init):
    """Random weights everywhere (so every loaded tensor matters); REM values
    drawn from the given ranges (both signs of eta)."""
    d = m.d
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.randn(3 * d, d, dtype=f64) * (1.5 / math.sqrt(d)))
        m.out_proj.weight.copy_(torch.randn(d, d, dtype=f64) * (1.0 / math.sqrt(d)))
        if m.in_proj_bias is not None:
            m.in_proj_bias.copy_(torch.randn(3 * d, dtype=f64) * 0.3)
            m.out_proj.bias.copy_(torch.randn(d, dtype=f64) * 0.3)
        r = m.rem
        for name, vals in init.items():
            getattr(r, name).copy_(torch.tensor(vals, dtype=f64))


def spec_tensor(spec):
    s = normalize_spec(spec)
    return torch.tensor([s["regular"], s["cyclic"], s["dilated_regular"], s["dilated_cyclic"],
                         int(s["masked"]), s["max_distance"]] + list(s["dilations"]),
                        dtype=torch.int64)


def check_against_mha(m, inputs, kpm, causal):
    """With the gate shut, the layer is torch.nn.MultiheadAttention."""
    mha = nn.MultiheadAttention(m.d, m.H, bias=m.in_proj_bias is not None,
                                batch_first=True).double().eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(m.in_proj_weight)
        mha.out_proj.weight.copy_(m.out_proj.weight)
        if m.in_proj_bias is not None:
            mha.in_proj_bias.copy_(m.in_proj_bias)
            mha.out_proj.bias.copy_(m.out_proj.bias)
        q, k, v = inputs
        Lq, Lk = q.shape[1], k.shape[1]
        mask = causal_mask(Lq, Lk, dtype=f64) if causal else None
        want = mha(q, k, v, attn_mask=mask, key_padding_mask=kpm, need_weights=False)[0]
        shut = torch.full_like(m.rem.mu, -1e4)
        got = m(q, k, v, kpm, causal, mu=shut)
    err = (got - want).abs().max().item()
    assert err <= 1e-12 * want.abs().max().item(), f"layer vs nn.MultiheadAttention: {err}"


def record(prefix, m, gate, inputs, kpm=None, causal=False):
    """inputs: dict name -> tensor; "input" (self-attention) or input_q/_k/_v."""
    put(f"{prefix}.spec", spec_tensor(m.spec))
    put(f"{prefix}.config", torch.tensor([m.d, m.H, int(gate == "layer"),
                                          int(m.in_proj_bias is not None), int(causal)],
                                         dtype=torch.int64))
    for n, t in m.state_dict().items():
        put(f"{prefix}.state.{n}", t)
    for n, t in inputs.items():
        put(f"{prefix}.{n}", t)
        t.requires_grad_(True)
    if kpm is not None:
        put(f"{prefix}.key_padding_mask", kpm)
    if "input" in inputs:
        qkv = (inputs["input"],) * 3
    else:
        qkv = (inputs["input_q"], inputs["input_k"], inputs["input_v"])
    check_against_mha(m, qkv, kpm, causal)
    out = m(*qkv, kpm, causal)
    assert torch.isfinite(out).all(), prefix
    probe = torch.randn_like(out)
    (out * probe).sum().backward()
    put(f"{prefix}.output", out)
    put(f"{prefix}.probe", probe)
    for n, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().max() > 0, (prefix, n)
        put(f"{prefix}.grad.{n}", p.grad)
    for n, t in inputs.items():
        put(f"{prefix}.grad.{n}", t.grad)


def cases():
    # (a) causal self-attention: every kind of REM head, 6 of 8 heads, gate per head.
    spec_a = {"regular": 1, "cyclic": 1, "dilated_regular": 1, "dilated_cyclic": 1,
              "dilations": [2, 3], "masked": True}
    m = RSAAttentionRef(32, 8, spec_a, "head").eval()
    randomize(m, {"eta": [1.3, -1.6], "nu": [1.2, 1.7], "theta": [math.pi / 4, 1.1],
                  "mu": [-1.5, 0.8, -0.3, 1.9, 0.4, -0.9]})
    record("causal", m, "head", {"input": torch.randn(2, 9, 32, dtype=f64)}, causal=True)

    # (b) bidirectional (unmasked REM), key padding, one gate for the layer.
    spec_b = {"regular": 1, "cyclic": 1, "dilated_regular": 1, "dilations": [2],
              "masked": False}
    m = RSAAttentionRef(24, 6, spec_b, "layer").eval()
    randomize(m, {"eta": [-1.4, 1.8], "nu": [1.6], "theta": [0.6], "mu": [0.7]})
    kpm = torch.tensor([[0, 0, 0, 0, 0, 0, 1, 1],
                        [0, 0, 1, 0, 0, 0, 0, 1]], dtype=torch.bool)
    record("unmasked", m, "layer", {"input": torch.randn(2, 8, 24, dtype=f64)}, kpm=kpm)

    # (c) cross-attention, Lq < Lk, causal: queries are the last Lq positions
    # (REM distance n = (Lk - Lq) + i - j), separate query / key / value tensors.
    spec_c = {"regular": 1, "cyclic": 1, "dilated_cyclic": 1, "dilations": [2], "masked": True}
    m = RSAAttentionRef(24, 6, spec_c, "head").eval()
    randomize(m, {"eta": [-1.7], "nu": [1.1, 1.9], "theta": [math.pi / 4, 2.0],
                  "mu": [0.5, -1.2, 1.4, 0.2, -0.6]})
    B, Lq, Lk = 2, 4, 9
    record("cross", m, "head", {"input_q": torch.randn(B, Lq, 24, dtype=f64),
                                "input_k": torch.randn(B, Lk, 24, dtype=f64),
                                "input_v": torch.randn(B, Lk, 24, dtype=f64)}, causal=True)

    # (d) no biases, every head a REM head, max_distance, causal self-attention.
    spec_d = {"regular": 2, "cyclic": 1, "masked": True, "max_distance": 4}
    m = RSAAttentionRef(16, 4, spec_d, "head", bias=False).eval()
    randomize(m, {"eta": [1.2, -1.9], "nu": [1.4], "theta": [math.pi / 4],
                  "mu": [1.0, -0.5, 0.3, -1.8]})
    record("nobias_maxdist", m, "head", {"input": torch.randn(2, 8, 16, dtype=f64)}, causal=True)

    # (e) long causal self-attention with key padding: L = 260 >= 256 takes Remora's
    # causal row-block path in rsa_attention (blocks of 128 query rows).
    spec_e = {"regular": 1, "dilated_regular": 1, "dilations": [3], "masked": True}
    m = RSAAttentionRef(6, 3, spec_e, "head").eval()
    randomize(m, {"eta": [1.9, -1.5], "mu": [0.3, -0.8]})
    kpm = torch.zeros(1, 260, dtype=torch.bool)
    kpm[0, [5, 100, 200, 259]] = True
    record("long_causal", m, "head", {"input": torch.randn(1, 260, 6, dtype=f64)}, kpm=kpm,
           causal=True)


def main():
    torch.manual_seed(20240611)
    cases()
    write_golden(OUT, tensors, "remora-golden-rsa", VERSION, "tools/goldens/make_rsa_goldens.py")


if __name__ == "__main__":
    sys.exit(main())
