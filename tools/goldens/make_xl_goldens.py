#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/golden_xl.safetensors: PyTorch 1.13 goldens for Remora's
Transformer-XL and RSA-XL (docs/math.md#relative-attention-and-rel-shift and #recurrence-encoding-matrices-rem-2), from tools/torch_ref/mem_transformer.py.

Run with Debian's python3-torch:  /usr/bin/python3 tools/goldens/make_xl_goldens.py
Deterministic (fixed seeds, CPU, float64); the file is rewritten byte-identical.
Before writing, it checks the reference against an independent index-form
transcription (see SELF-CHECK below) and refuses to write on a mismatch.

CASES (all float64, dropout = dropatt = 0, batch 2, 3 consecutive segments):
  case_a  softmax XL, post-LN: n_token 20, n_layer 2, n_head 2, d_model 16, d_head 8,
          d_inner 32, tgt_len 5, mem_len 4
  case_b  as case_a with pre_lnorm, same_length and clamp_len 3
  case_c  RSA-XL: as case_a but n_head 4, d_head 4, REM spec {regular 1, cyclic 1}
          (Hr = 3: regular, cos, sin; head 3 plain softmax), gate per head (mu [3]),
          and tgt_len 4, mem_len 6 so that the memory grows 0 -> 4 -> 6 and the
          memory update really concatenates [old mem; new hidden] (with mem_len <
          tgt_len, as in case_a, the new memory is just the tail of the segment)
  case_d  softmax XL, post-LN, same_length, tgt_len 4, mem_len 6 (exercises the
          official mask_len <= 0 branch in segment 0 and a partial memory)
The config of each case is the JSON string __metadata__["case_X.config"] with keys
n_token n_layer n_head d_model d_head d_inner tgt_len mem_len clamp_len same_length
pre_lnorm dropout dropatt attention ("softmax"|"rsa") rem_spec gate batch n_segments
layer_norm_eps init. __metadata__ also has format "remora-golden-xl", version, cases.

TENSORS (X = case letter; <p> = a parameter name, the official state-dict name;
ALL activations are BATCH-major, unlike the time-major PyTorch model):
  case_X.param.<p>            every parameter (e.g. case_a.param.layers.0.dec_attn.qkv_net.weight)
  case_X.seg{s}.ids           I64 [B, L]   input ids of segment s = 0, 1, 2
  case_X.seg{s}.targets       I64 [B, L]   next-token targets (the stream shifted by one)
  case_X.seg{s}.logits        F64 [B, L, n_token]
  case_X.seg{s}.loss          F64 [1]      mean NLL over the B*L tokens
  case_X.seg{s}.hidden        F64 [B, L, d_model]  top-layer output (before the logits)
  case_X.seg{s}.mems.{l}      F64 [B, M', d_model]  memory of layer l AFTER segment s,
                              l = 0..n_layer-1, M' = min(mem_len, M + L)
  case_X.grad.<p>             d(seg2 loss)/dp, memory from segments 0-1 detached
  case_X.grad_sum.<p>         gradients accumulated by backward() after each segment
                              (no zero_grad in between), detached memories: the
                              training loop's grad of loss0 + loss1 + loss2
Segment s >= 1 starts from seg{s-1}.mems; segment 0 starts with an empty memory (M = 0).
Tokens: a stream of B x (3 L + 1) ids; seg s ids = stream[:, sL:(s+1)L], targets =
stream[:, sL+1:(s+1)L+1].

SEMANTIC CHOICES (where the official code and docs/math.md leave room):
- Initialisation: the docs/math.md#relative-attention-and-rel-shift scheme with larger spreads so that attention is far
  from uniform and every tensor influences the outputs: weights (embedding, qkv, r,
  o, FF) and r_w_bias/r_r_bias N(0, 0.3); LayerNorm weights N(1, 0.3); all biases
  (FF, LayerNorm, crit.out_layers.0.bias) N(0, 0.1) instead of 0. REM: eta ~
  U([-2,-1] u [1,2]), nu ~ U(1,2), theta = pi/4 + U(-0.3, 0.3) (not exactly pi/4
  so cos and sin heads differ), mu ~ U(-1.5, 1.5) (so neither side of the gate is
  negligible). MemTransformerLM.reset_parameters() keeps docs/math.md#relative-attention-and-rel-shift exactly.
- The mask is applied with -inf in float64 (the official code rounds the scores
  through float32 there); the rel_shift "garbage" entries above the causal
  diagonal are finite and masked, so they never reach the outputs or gradients.
- n_layer memories (the official code's extra top-layer memory is never read;
  the top output is stored as seg{s}.hidden instead).
- same_length mask: key j hidden from query i when j <= M + i - mem_len (M = the
  actual memory length of this segment, 0 for segment 0), equal to the official
  tril(ones, -mask_shift_len) form (checked below).
- clamp_len: pos = min(distance, clamp_len) in R only (the memory and the REM keep
  true distances).
- RSA-XL: P_h = masked REM (torch_ref.rem.rem_matrix(spec, ..., Lq, Lk)) at distance
  n = M + i - j >= 1 over all Lk = M + Lq keys, NOT limited by same_length or
  clamp_len; O_h = (1 - sigmoid(mu_h)) dropatt(A_h) V_h + sigmoid(mu_h) P_h V_h for
  h < Hr; REM parameters are per layer (layers.N.dec_attn.rem.{eta,nu,theta,mu}).
- Loss: mean over all B * L targets of -log softmax(h E^T + b)[target] (the
  official training loop's loss.float().mean()).
- Scalars are stored with shape [1].

SELF-CHECK (runs on every invocation, asserts before writing):
1. rel_shift on random data equals the index form BD[i, j] = BD_raw[i, Lq-1-i+j]
   for all j <= M + i, for several (Lq, M).
2. The official triu/tril same_length mask equals the form of docs/math.md#clamp_len-and-same_length for many (Lq, M, mem_len).
3. For every case, an independent batch-major transcription (no rel_shift: the
   positional vector of each (i, j) pair is built from its distance directly; REM
   entries from closed-form f(n) in Python, not rem_matrix; masks from docs/math.md#distance-masking-and-padding
   inequalities; memories updated by slicing) reproduces logits, losses, hidden
   states, memories of all 3 segments and the seg-2 gradients of every parameter
   to 1e-12.
Bump VERSION when the layout changes.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_ref.mem_transformer import MemTransformerLM, make_dec_attn_mask, rel_shift  # noqa: E402
from torch_ref import rem as rem_ref  # noqa: E402
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402

VERSION = "1"
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "tests", "data",
                   "golden_xl.safetensors")
N_SEG = 3
BATCH = 2

BASE = dict(n_token=20, n_layer=2, n_head=2, d_model=16, d_head=8, d_inner=32, tgt_len=5,
            mem_len=4, clamp_len=0, same_length=False, pre_lnorm=False, dropout=0.0,
            dropatt=0.0, attention="softmax", rem_spec=None, gate="head")
CASES = {
    "a": dict(BASE),
    "b": dict(BASE, pre_lnorm=True, same_length=True, clamp_len=3),
    "c": dict(BASE, n_head=4, d_head=4, tgt_len=4, mem_len=6, attention="rsa",
              rem_spec={"regular": 1, "cyclic": 1}, gate="head"),
    "d": dict(BASE, same_length=True, tgt_len=4, mem_len=6),
}
INIT = dict(weight_std=0.3, ln_weight_std=0.3, bias_std=0.1, theta_jitter=0.3, mu_range=1.5)

tensors = {}


def put(name, t):
    assert name not in tensors, name
    t = t.detach()
    assert t.dtype in (torch.float64, torch.int64), (name, t.dtype)
    tensors[name] = t.contiguous().clone()


# ---------------------------------------------------------------- the model

def build(cfg, seed):
    torch.manual_seed(seed)
    kw = {k: v for k, v in cfg.items() if k not in ("rem_spec", "gate")}
    if cfg["attention"] == "rsa":
        kw.update(rem_spec=cfg["rem_spec"], gate=cfg["gate"])
    model = MemTransformerLM(**kw).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".rem." in name:
                continue
            if "layer_norm.weight" in name:
                p.normal_(1.0, INIT["ln_weight_std"])
            elif name.endswith("bias") and name not in ("r_w_bias", "r_r_bias"):
                p.normal_(0.0, INIT["bias_std"])
            else:
                p.normal_(0.0, INIT["weight_std"])
        for layer in model.layers:
            if hasattr(layer.dec_attn, "rem"):
                rem = layer.dec_attn.rem
                rem.reset_parameters()          # eta, nu as docs/math.md#recurrence-encoding-matrices-rem
                rem.theta.add_(torch.empty_like(rem.theta).uniform_(-INIT["theta_jitter"],
                                                                     INIT["theta_jitter"]))
                rem.mu.uniform_(-INIT["mu_range"], INIT["mu_range"])
    model.eval()  # dropout is 0 anyway
    return model


def run_segments(model, stream, L):
    """The training loop: backward per segment, detached memories, no zero_grad.
    Returns per-segment records, the accumulated grads, and the seg-2-only grads."""
    model.zero_grad(set_to_none=True)
    mems, segs = None, []
    for s in range(N_SEG):
        ids = stream[:, s * L:(s + 1) * L]
        tgt = stream[:, s * L + 1:(s + 1) * L + 1]
        mems_in = mems
        logits, loss, mems, hidden = model(ids.t().contiguous(), tgt.t().contiguous(), mems)
        loss.backward()
        segs.append(dict(ids=ids, targets=tgt, logits=logits.transpose(0, 1), loss=loss,
                         hidden=hidden.transpose(0, 1),
                         mems=[m.transpose(0, 1) for m in mems], mems_in=mems_in))
    grad_sum = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    # seg-2 loss alone, recomputed from the memories segment 1 left behind
    names, params = zip(*model.named_parameters())
    s = segs[2]
    _, loss2, _, _ = model(s["ids"].t().contiguous(), s["targets"].t().contiguous(), s["mems_in"])
    assert torch.equal(loss2, s["loss"]), "recomputed seg-2 loss differs"
    grad2 = dict(zip(names, torch.autograd.grad(loss2, params)))
    return segs, grad_sum, grad2


# ---------------------------------------------------------------- independent transcription

def rem_closed_form(spec, eta, nu, theta, Lq, M):
    """P [Hr, Lq, Lk] from f(n) in plain Python per entry (masked REM, docs/math.md#recurrence-encoding-matrices-rem)."""
    s = rem_ref.normalize_spec(spec)
    assert s["dilated_regular"] == 0 and s["dilated_cyclic"] == 0 and s["max_distance"] == 0
    heads = [("regular", k) for k in range(s["regular"])]
    for k in range(s["cyclic"]):
        heads += [("cos", k), ("sin", k)]
    Lk = M + Lq
    rows = []
    for kind, k in heads:
        P = []
        for i in range(Lq):
            row = []
            for j in range(Lk):
                n = M + i - j
                if n < 1:
                    row.append(torch.zeros((), dtype=torch.float64))
                elif kind == "regular":
                    row.append(torch.tanh(eta[k]) ** n)
                else:
                    g = torch.sigmoid(nu[k]) ** n
                    row.append(g * (torch.cos(n * theta[k]) if kind == "cos" else torch.sin(n * theta[k])))
            P.append(torch.stack(row))
        rows.append(torch.stack(P))
    return torch.stack(rows)


def naive_segment(cfg, p, ids, tgt, mems):
    """Batch-major, index-form forward of one segment. p: name -> tensor.
    mems: list of [B, M, d] (M may be 0). Returns logits, loss, hidden, new_mems."""
    B, Lq = ids.shape
    d, H, D = cfg["d_model"], cfg["n_head"], cfg["d_head"]
    M = mems[0].shape[1]
    Lk = M + Lq
    E = p["word_emb.emb_layers.0.weight"]
    h = E[ids] * math.sqrt(d)
    # distances and the positional vector of every (i, j) pair, built directly
    i_idx = torch.arange(Lq).view(Lq, 1)
    j_idx = torch.arange(Lk).view(1, Lk)
    dist = M + i_idx - j_idx                                   # [Lq, Lk]
    masked = dist < 0
    if cfg["same_length"]:
        masked = masked | (j_idx <= M + i_idx - cfg["mem_len"])
    pos = dist.clamp(min=0).to(torch.float64)
    if cfg["clamp_len"] > 0:
        pos = pos.clamp(max=cfg["clamp_len"])
    inv_freq = torch.tensor([10000.0 ** (-(2.0 * k) / d) for k in range(d // 2)],
                            dtype=torch.float64)
    ang = pos[..., None] * inv_freq                            # [Lq, Lk, d/2]
    Rij = torch.cat([ang.sin(), ang.cos()], -1)                # [Lq, Lk, d]
    u, vb = p["r_w_bias"], p["r_r_bias"]
    ln = lambda x, pre: F.layer_norm(x, (d,), p[pre + ".weight"], p[pre + ".bias"], 1e-5)
    hids = []
    for l in range(cfg["n_layer"]):
        pre = f"layers.{l}."
        hids.append(h)
        c = torch.cat([mems[l], h], 1)                         # [B, Lk, d]
        if cfg["pre_lnorm"]:
            c = ln(c, pre + "dec_attn.layer_norm")
        qkv = c @ p[pre + "dec_attn.qkv_net.weight"].t()
        q, k, v = qkv[..., :H * D], qkv[..., H * D:2 * H * D], qkv[..., 2 * H * D:]
        q = q[:, M:].reshape(B, Lq, H, D)
        k = k.reshape(B, Lk, H, D)
        v = v.reshape(B, Lk, H, D)
        r = (Rij @ p[pre + "dec_attn.r_net.weight"].t()).reshape(Lq, Lk, H, D)
        AC = torch.einsum("bihd,bjhd->bhij", q + u, k)
        BD = torch.einsum("bihd,ijhd->bhij", q + vb, r)
        S = (AC + BD) / math.sqrt(D)
        S = torch.where(masked, torch.full_like(S, float("-inf")), S)
        A = torch.softmax(S, -1)
        O = torch.einsum("bhij,bjhd->bihd", A, v)              # [B, Lq, H, D]
        if cfg["attention"] == "rsa":
            P = rem_closed_form(cfg["rem_spec"], p[pre + "dec_attn.rem.eta"],
                                p[pre + "dec_attn.rem.nu"], p[pre + "dec_attn.rem.theta"], Lq, M)
            Hr = P.shape[0]
            heads = []
            for hh in range(H):
                if hh < Hr:
                    mu = p[pre + "dec_attn.rem.mu"]
                    g = torch.sigmoid(mu[hh] if mu.numel() > 1 else mu[0])
                    heads.append((1 - g) * O[:, :, hh] + g * torch.einsum("ij,bjd->bid", P[hh], v[:, :, hh]))
                else:
                    heads.append(O[:, :, hh])
            O = torch.stack(heads, 2)
        a = O.reshape(B, Lq, H * D) @ p[pre + "dec_attn.o_net.weight"].t()
        ff = lambda x: (torch.relu(x @ p[pre + "pos_ff.CoreNet.0.weight"].t() + p[pre + "pos_ff.CoreNet.0.bias"])
                        @ p[pre + "pos_ff.CoreNet.3.weight"].t() + p[pre + "pos_ff.CoreNet.3.bias"])
        if cfg["pre_lnorm"]:
            y = h + a
            h = y + ff(ln(y, pre + "pos_ff.layer_norm"))
        else:
            y = ln(h + a, pre + "dec_attn.layer_norm")
            h = ln(y + ff(y), pre + "pos_ff.layer_norm")
    logits = h @ E.t() + p["crit.out_layers.0.bias"]
    logp = torch.log_softmax(logits, -1)
    loss = -logp.gather(-1, tgt.unsqueeze(-1)).mean()
    new_mems = [torch.cat([mems[l], hids[l]], 1)[:, -cfg["mem_len"]:].detach()
                for l in range(cfg["n_layer"])]
    return logits, loss, h, new_mems


def close(a, b, what, tol=1e-12):
    err = (a - b).abs().max().item() if a.numel() else 0.0
    scale = max(1.0, b.abs().max().item() if b.numel() else 0.0)
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
    assert err <= tol * scale, f"{what}: max abs err {err:.3e}"
    return err


def self_check_static():
    g = torch.Generator().manual_seed(1)
    for Lq, M in [(1, 0), (5, 0), (5, 4), (4, 6), (3, 7)]:
        Lk = M + Lq
        x = torch.randn(Lq, Lk, 2, 3, generator=g, dtype=torch.float64)
        y = rel_shift(x)
        for i in range(Lq):
            for j in range(Lk):
                if j <= M + i:
                    assert torch.equal(y[i, j], x[i, Lq - 1 - i + j]), (Lq, M, i, j)
    for Lq in range(1, 7):
        for M in range(0, 9):
            for mem_len in range(1, 9):
                got = make_dec_attn_mask(Lq, M, mem_len, True)
                i = torch.arange(Lq).view(-1, 1)
                j = torch.arange(M + Lq).view(1, -1)
                want = (j > M + i) | (j <= M + i - mem_len)
                assert torch.equal(got, want), (Lq, M, mem_len)
                assert torch.equal(make_dec_attn_mask(Lq, M, mem_len, False), j > M + i)


def self_check_case(key, cfg, model, segs, grad2):
    p = {n: t.detach().clone() for n, t in model.named_parameters()}
    d = cfg["d_model"]
    mems = [torch.zeros(BATCH, 0, d, dtype=torch.float64) for _ in range(cfg["n_layer"])]
    worst = 0.0
    for s, rec in enumerate(segs):
        if s == 2:
            for t in p.values():
                t.requires_grad_(True)
        logits, loss, hidden, mems = naive_segment(cfg, p, rec["ids"], rec["targets"], mems)
        worst = max(worst, close(logits, rec["logits"], f"case_{key} seg{s} logits"),
                    close(loss.view(1), rec["loss"].view(1), f"case_{key} seg{s} loss"),
                    close(hidden, rec["hidden"], f"case_{key} seg{s} hidden"))
        for l, m in enumerate(mems):
            worst = max(worst, close(m, rec["mems"][l], f"case_{key} seg{s} mems.{l}"))
    names = list(p)
    grads = torch.autograd.grad(loss, [p[n] for n in names])
    for n, gr in zip(names, grads):
        worst = max(worst, close(gr, grad2[n], f"case_{key} grad {n}"))
    return worst


# ---------------------------------------------------------------- main

def main():
    torch.set_default_dtype(torch.float64)
    self_check_static()
    meta = {"format": "remora-golden-xl", "version": VERSION,
            "generator": "tools/goldens/make_xl_goldens.py", "torch": torch.__version__,
            "cases": ",".join(CASES), "n_segments": str(N_SEG)}
    for ci, (key, cfg) in enumerate(CASES.items()):
        model = build(cfg, seed=1000 + ci)
        L = cfg["tgt_len"]
        g = torch.Generator().manual_seed(2000 + ci)
        stream = torch.randint(cfg["n_token"], (BATCH, N_SEG * L + 1), generator=g)
        segs, grad_sum, grad2 = run_segments(model, stream, L)
        worst = self_check_case(key, cfg, model, segs, grad2)
        full = dict(cfg, batch=BATCH, n_segments=N_SEG, layer_norm_eps=1e-5,
                    init=dict(INIT, note="see tools/goldens/make_xl_goldens.py docstring"))
        meta[f"case_{key}.config"] = json.dumps(full, sort_keys=True)
        pre = f"case_{key}"
        for n, t in model.named_parameters():
            put(f"{pre}.param.{n}", t)
        for s, rec in enumerate(segs):
            put(f"{pre}.seg{s}.ids", rec["ids"])
            put(f"{pre}.seg{s}.targets", rec["targets"])
            put(f"{pre}.seg{s}.logits", rec["logits"])
            put(f"{pre}.seg{s}.loss", rec["loss"].view(1))
            put(f"{pre}.seg{s}.hidden", rec["hidden"])
            for l, m in enumerate(rec["mems"]):
                put(f"{pre}.seg{s}.mems.{l}", m)
        for n in grad2:
            put(f"{pre}.grad.{n}", grad2[n])
        for n in grad_sum:
            put(f"{pre}.grad_sum.{n}", grad_sum[n])
        print(f"case_{key}: {cfg['attention']} losses "
              + " ".join(f"{r['loss'].item():.6f}" for r in segs)
              + f"; self-check worst abs err {worst:.2e}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, tensors, meta)
    print(f"wrote {os.path.normpath(OUT)}: {len(tensors)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
