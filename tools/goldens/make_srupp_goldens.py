#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/srupp_op.safetensors and tests/data/srupp_model.safetensors:
PyTorch 1.13 goldens for Remora's sru_recurrence op and SRU++ language model
(docs/math.md#the-sru-elementwise-recurrence), from tools/torch_ref/srupp.py.

Run with Debian's python3-torch:  /usr/bin/python3 tools/goldens/make_srupp_goldens.py
Deterministic (fixed seeds, CPU, float64); the files are rewritten byte-identical.
Before writing, it checks the op's Python loop against an independent scalar
transcription (one Python float recurrence per lane) and runs
torch.autograd.gradcheck on it; it refuses to write on a mismatch.

srupp_op.safetensors (format "remora-golden-srupp-op"), cases X in OP_CASES:
  op_X.U [L, B, D, k], op_X.x [L, B, D] (k = 3 only), op_X.v [2, D], op_X.b [2, D],
  op_X.c0 [B, D] (when used), op_X.mask [B, D] (when used; 0 or 1/(1-p)),
  op_X.probe_h, op_X.probe_c [L, B, D], op_X.probe_last [B, D]
  outputs op_X.h, op_X.c, op_X.c_last and, for
  loss = sum(h probe_h) + sum(c probe_c) + sum(c_last probe_last),
  op_X.grad.{U, x, v, b, c0}. __metadata__ "op_X.config": {k, bidirectional, c0, mask}.

srupp_model.safetensors (format "remora-golden-srupp"), cases X in MODEL_CASES
(batch 2, 3 consecutive segments, dropout 0, float64; ALL activations BATCH-major):
  case_X.param.<p>          every parameter under its official state-dict name
  case_X.seg{s}.ids         I64 [B, L];   .targets I64 [B, L] (the stream shifted by one)
  case_X.seg{s}.logits      [B, L, V];    .loss [1] (mean NLL);  .hidden [B, L, d]
  case_X.seg{s}.mems.{l}    [B, M', d] memory of layer l AFTER segment s
  case_X.seg{s}.cells.{l}   [B, d] c_last of layer l after segment s
  case_X.grad.<p>           d(seg-2 loss)/dp; memories and cells of segments 0-1 detached
  __metadata__ "case_X.config": JSON with n_token d_model d_attn n_layer attn_every
  mem_len tgt_len batch highway_bias.
Segment s >= 1 starts from segment s-1's memories and cells (the official loop
carries `hidden` and the saved inputs); segment 0 from zeros and no memory.

Initialisation: the official reset (xavier transform matrices, weight_c U(-1, 1),
b_r = -2, embedding / output U(+-sqrt(3/V))) and then, so that every parameter
matters, alpha ~ U(0.5, 1.5) instead of 0, LayerNorm weights N(1, 0.3), LayerNorm
biases, the cell bias and the output bias + N(0, 0.1).
Bump VERSION when the layout changes.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_ref.srupp import Model, sru_recurrence  # noqa: E402
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402

VERSION = "1"
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "tests", "data")
N_SEG = 3
BATCH = 2

OP_CASES = {
    "a": dict(L=6, B=2, D=5, k=3, bidirectional=False, c0=True, mask=True),
    "b": dict(L=5, B=3, D=6, k=4, bidirectional=True, c0=True, mask=True),
    "c": dict(L=4, B=2, D=4, k=3, bidirectional=True, c0=False, mask=False),
}
MODEL_CASES = {
    # attention on layer 1 only; mem_len = segment length = the official memory
    "a": dict(n_token=20, d_model=16, d_attn=8, n_layer=3, attn_every=2, mem_len=5, tgt_len=5),
    # attention on every layer; mem_len > L so the memory grows 0 -> 4 -> 6 by concatenation
    "b": dict(n_token=17, d_model=12, d_attn=6, n_layer=2, attn_every=1, mem_len=6, tgt_len=4),
}


def scalar_recurrence(U, x, v, b, c0, mask, bidirectional):
    """Independent transcription: one Python-float recurrence per (batch, unit) lane."""
    L, B, D, k = U.shape
    h = [[[0.0] * D for _ in range(B)] for _ in range(L)]
    c = [[[0.0] * D for _ in range(B)] for _ in range(L)]
    last = [[0.0] * D for _ in range(B)]
    sig = lambda z: 1.0 / (1.0 + math.exp(-z))
    for bb in range(B):
        for j in range(D):
            rev = bidirectional and j >= D // 2
            cur = float(c0[bb, j]) if c0 is not None else 0.0
            m = float(mask[bb, j]) if mask is not None else 1.0
            for s in range(L):
                t = L - 1 - s if rev else s
                u = [float(U[t, bb, j, q]) for q in range(k)]
                xv = float(x[t, bb, j]) if k == 3 else u[3]
                f = sig(u[1] + float(v[0, j]) * cur + float(b[0, j]))
                r = sig(u[2] + float(v[1, j]) * cur + float(b[1, j]))
                cur = f * cur + (1 - f) * u[0]
                h[t][bb][j] = r * m * cur + (1 - r * m) * xv
                c[t][bb][j] = cur
            last[bb][j] = cur
    dt = torch.float64
    return torch.tensor(h, dtype=dt), torch.tensor(c, dtype=dt), torch.tensor(last, dtype=dt)


def op_inputs(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    L, B, D, k = cfg["L"], cfg["B"], cfg["D"], cfg["k"]
    rn = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    un = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64) * 2 - 1
    inp = {"U": rn(L, B, D, k), "v": un(2, D), "b": un(2, D)}
    if k == 3:
        inp["x"] = rn(L, B, D)
    if cfg["c0"]:
        inp["c0"] = rn(B, D)
    if cfg["mask"]:
        keep = (torch.rand(B, D, generator=g) > 0.3).to(torch.float64)
        inp["mask"] = keep / 0.7
    probes = {"probe_h": rn(L, B, D), "probe_c": rn(L, B, D), "probe_last": rn(B, D)}
    return inp, probes


def self_check_op():
    for key, cfg in OP_CASES.items():
        inp, _ = op_inputs(cfg, 100 + ord(key))
        args = (inp["U"], inp.get("x"), inp["v"], inp["b"], inp.get("c0"), inp.get("mask"),
                cfg["bidirectional"])
        got = sru_recurrence(*args)
        want = scalar_recurrence(*args)
        for a, w, n in zip(got, want, ("h", "c", "c_last")):
            err = (a - w).abs().max().item()
            assert err < 1e-12, f"self-check op_{key}.{n}: loop vs scalar differ by {err}"
        # gradients of the loop (autograd) by finite differences
        names = [n for n in ("U", "x", "v", "b", "c0") if n in inp]
        leaves = [inp[n].clone().requires_grad_() for n in names]

        def f(*ts):
            d = dict(zip(names, ts))
            h, c, last = sru_recurrence(d["U"], d.get("x"), d["v"], d["b"], d.get("c0"),
                                        inp.get("mask"), cfg["bidirectional"])
            return h.sum() + (c * c).sum() + last.sum()
        assert torch.autograd.gradcheck(f, leaves), f"self-check op_{key}: gradcheck failed"


def make_op_file():
    tensors, meta = {}, {"format": "remora-golden-srupp-op", "version": VERSION,
                         "cases": ",".join(OP_CASES)}
    for key, cfg in OP_CASES.items():
        inp, probes = op_inputs(cfg, 100 + ord(key))
        leaves = {n: t.clone().requires_grad_() for n, t in inp.items() if n != "mask"}
        h, c, last = sru_recurrence(leaves["U"], leaves.get("x"), leaves["v"], leaves["b"],
                                    leaves.get("c0"), inp.get("mask"), cfg["bidirectional"])
        loss = (h * probes["probe_h"]).sum() + (c * probes["probe_c"]).sum() + \
            (last * probes["probe_last"]).sum()
        loss.backward()
        pre = f"op_{key}."
        for n, t in list(inp.items()) + list(probes.items()):
            tensors[pre + n] = t
        tensors[pre + "h"], tensors[pre + "c"], tensors[pre + "c_last"] = h, c, last
        for n, t in leaves.items():
            tensors[pre + "grad." + n] = t.grad
        meta["op_" + key + ".config"] = json.dumps(
            {"k": cfg["k"], "bidirectional": cfg["bidirectional"], "c0": cfg["c0"],
             "mask": cfg["mask"]})
    write_safetensors(os.path.join(DATA, "srupp_op.safetensors"),
                      [(n, t.detach().contiguous()) for n, t in tensors.items()], meta)


def perturb(m):
    """Moves the parameters off their initial values so that every one matters:
    alpha U(0.5, 1.5), LayerNorm weights N(1, 0.3), every bias + N(0, 0.1)."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith(".alpha"):
                p.uniform_(0.5, 1.5)
            elif "layer_norm.weight" in name:
                p.normal_(1.0, 0.3)
            elif name.endswith(".bias"):  # LayerNorm, cell (b_f; b_r) and output biases
                p.add_(torch.randn_like(p) * 0.1)


def build(cfg, seed):
    torch.manual_seed(seed)
    m = Model(cfg["n_token"], cfg["d_model"], cfg["d_attn"], cfg["n_layer"], cfg["attn_every"],
              dropout=0.0, attn_dropout=0.0, mem_len=cfg["mem_len"]).double()
    perturb(m)
    m.eval()
    return m


def make_model_file():
    tensors, meta = [], {"format": "remora-golden-srupp", "version": VERSION,
                         "cases": ",".join(MODEL_CASES)}
    for key, cfg in MODEL_CASES.items():
        m = build(cfg, 7 + ord(key))
        pre = f"case_{key}."
        for n, p in m.named_parameters():
            tensors.append((pre + "param." + n, p.detach().clone()))
        L = cfg["tgt_len"]
        g = torch.Generator().manual_seed(11 + ord(key))
        stream = torch.randint(0, cfg["n_token"], (BATCH, N_SEG * L + 1), generator=g)
        hidden, mem = None, None
        for s in range(N_SEG):
            ids, tgt = stream[:, s * L:(s + 1) * L], stream[:, s * L + 1:(s + 1) * L + 1]
            m.zero_grad()
            logits, h, hidden, mem = m(ids.t().contiguous(), hidden, mem)
            logits = logits.transpose(0, 1)  # batch-major [B, L, V]
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))
            loss.backward()
            sg = pre + f"seg{s}."
            tensors += [(sg + "ids", ids.contiguous()), (sg + "targets", tgt.contiguous()),
                        (sg + "logits", logits.detach()), (sg + "loss", loss.detach().view(1)),
                        (sg + "hidden", h.detach().transpose(0, 1))]
            for l in range(cfg["n_layer"]):
                tensors.append((sg + f"mems.{l}", mem[l].transpose(0, 1)))
                tensors.append((sg + f"cells.{l}", hidden[l]))
        for n, p in m.named_parameters():
            tensors.append((pre + "grad." + n, p.grad.detach().clone()))
        meta["case_" + key + ".config"] = json.dumps(dict(cfg, batch=BATCH, highway_bias=-2.0))
    write_safetensors(os.path.join(DATA, "srupp_model.safetensors"),
                      [(n, t.detach().contiguous()) for n, t in tensors], meta)


def main():
    torch.set_num_threads(1)
    self_check_op()
    make_op_file()
    make_model_file()
    for f in ("srupp_op.safetensors", "srupp_model.safetensors"):
        p = os.path.join(DATA, f)
        print(f"wrote {p} ({os.path.getsize(p)} bytes)")


if __name__ == "__main__":
    main()
