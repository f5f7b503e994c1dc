#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the StarSaber goldens (docs/math.md#starsaber-our-reading) from tools/torch_ref/starsaber.py:

  tests/data/starsaber_golden.safetensors   float64 cases plain, gated, plain_unscaled

Run with Debian's python3-torch:  /usr/bin/python3 tools/goldens/make_starsaber_goldens.py
Deterministic (fixed seeds, CPU); the file is rewritten byte-identical. Before
writing, the reference is checked against an independent loop transcription of
docs/math.md#starsaber-our-reading (SELF-CHECK: per-(b, i) softmax over j != i, explicit sums over j < i
and j > i) and nothing is written on a mismatch.

CASES (float64, eval mode, batch 3, L 6): vocab 11, d_model 8, n_layer 2,
num_classes 3, pad_token_id 0, dropout 0.1 (inactive in eval mode).
  plain            gated false, scale_scores true
  gated            gated true,  scale_scores true
  plain_unscaled   gated false, scale_scores false
Rows: 0 has no padding; 1 has its last 2 positions padded; 2 has one real token
(position 0: no admissible key, so a_0 = 0). Padded ids are 0 (the padding id).
MLM labels -100 except a few real positions (row 2 position 0 among them);
class labels [0, 2, 1].
__metadata__: format "remora-golden-starsaber", version, cases, and
case_X.config = the case's config as JSON (the keys of models::StarSaberConfig:
vocab_size, d_model, n_layer, gated, dropout, num_classes, pad_token_id,
scale_scores).

TENSORS (X = case name, <p> = parameter name as in models/starsaber.h):
  case_X.param.<p>        every parameter
  case_X.input_ids        I64 [B, L]
  case_X.attention_mask   I64 [B, L]  1 = real token
  case_X.mlm_labels       I64 [B, L]  -100 = ignored
  case_X.class_labels     I64 [B]
  case_X.token_logits     F64 [B, L, V]
  case_X.pooled           F64 [B, d]
  case_X.class_logits     F64 [B, C]
  case_X.hidden.{l}       F64 [B, L, d]  l = 0 (x) .. n_layer
  case_X.relation.{l}     F64 [B, L, L]  A of layer l
  case_X.mlm_loss, class_loss   F64 [1]
  case_X.grad.<p>         d(mlm_loss + class_loss)/dp for every parameter

Initialisation of the goldens (so that every tensor matters): embeddings N(0, 1)
(the padding row is NOT zeroed, so the test sees that it reaches nothing real
and gets no gradient), weight matrices N(0, 0.4), biases N(0, 0.2), alpha ~
U(0.3, 0.9) per layer (alpha = 0 would hide every layer path).
Bump VERSION when the layout changes.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402
from torch_ref.starsaber import StarSaber, num_parameters  # noqa: E402

VERSION = "1"
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".."))
DATA = os.path.join(ROOT, "tests", "data")
B, L = 3, 6

BASE = dict(vocab_size=11, d_model=8, n_layer=2, gated=False, dropout=0.1, num_classes=3,
            pad_token_id=0, scale_scores=True)
CASES = {
    "plain": dict(BASE),
    "gated": dict(BASE, gated=True),
    "plain_unscaled": dict(BASE, scale_scores=False),
}


def build(cfg, seed):
    torch.manual_seed(seed)
    model = StarSaber(cfg).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "embeddings.weight":
                p.normal_(0.0, 1.0)
            elif name.endswith(".alpha"):
                p.uniform_(0.3, 0.9)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.2)
            else:
                p.normal_(0.0, 0.4)
    model.eval()
    return model


def inputs(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    V, pad = cfg["vocab_size"], cfg["pad_token_id"]
    ids = torch.randint(1, V, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.int64)
    mask[1, L - 2:] = 0
    mask[2, 1:] = 0
    ids[mask == 0] = pad
    labels = torch.full((B, L), -100, dtype=torch.int64)
    for b, i in [(0, 0), (0, 3), (0, 5), (1, 1), (1, 3), (2, 0)]:
        labels[b, i] = torch.randint(1, V, (1,), generator=g).item()
    cls = torch.tensor([0, 2, 1], dtype=torch.int64)
    return ids, mask, labels, cls


# ---------------------------------------------------------------- independent transcription

def naive_forward(cfg, p, ids, mask):
    """Loops over (b, i, j) straight from docs/math.md#starsaber-our-reading."""
    d, gated = cfg["d_model"], cfg["gated"]
    s = 1.0 / math.sqrt(d) if cfg["scale_scores"] else 1.0
    x = p["embeddings.weight"][ids]
    h = x
    hidden, rel = [x], []
    for l in range(cfg["n_layer"]):
        pre = f"layers.{l}."
        Wb, Wp, Wf = p[pre + "W_b"], p[pre + "past.weight"], p[pre + "future.weight"]
        U, bU = p[pre + "input.weight"], p[pre + "input.bias"]
        rows, As = [], []
        for b in range(B):
            out_b, A_b = [], []
            for i in range(L):
                keys = [j for j in range(L) if j != i and mask[b, j] == 1]
                A_i = [torch.zeros((), dtype=torch.float64) for _ in range(L)]
                a = torch.zeros(d, dtype=torch.float64)
                if keys:
                    sc = torch.stack([s * (h[b, i] @ Wb @ h[b, j]) for j in keys])
                    w = torch.exp(sc - sc.max())
                    w = w / w.sum()
                    for wj, j in zip(w, keys):
                        A_i[j] = wj
                        a = a + wj * ((Wp if j < i else Wf) @ h[b, j])
                c = torch.tanh(a + U @ x[b, i] + bU)
                if gated:
                    z = torch.sigmoid(p[pre + "gate.weight"] @ torch.cat([a, x[b, i]]) + p[pre + "gate.bias"])
                    out_b.append((1 - z) * h[b, i] + z * c)
                else:
                    out_b.append(h[b, i] + p[pre + "alpha"][0] * c)
                A_b.append(torch.stack(A_i))
            rows.append(torch.stack(out_b))
            As.append(torch.stack(A_b))
        h = torch.stack(rows)
        hidden.append(h)
        rel.append(torch.stack(As))
    logits = h @ p["mlm_head.weight"].t() + p["mlm_head.bias"]
    pooled = torch.stack([h[b][mask[b] == 1].mean(0) for b in range(B)])
    cls = pooled @ p["classifier.weight"].t() + p["classifier.bias"]
    return logits, pooled, cls, hidden, rel


def close(a, b, what, tol=1e-12):
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
    err = (a - b).abs().max().item()
    scale = max(1.0, b.abs().max().item())
    assert err <= tol * scale, f"{what}: max abs err {err:.3e}"
    return err


def main():
    torch.set_default_dtype(torch.float64)
    tensors = {}
    meta = {"format": "remora-golden-starsaber", "version": VERSION,
            "generator": "tools/goldens/make_starsaber_goldens.py", "torch": torch.__version__,
            "cases": ",".join(CASES)}
    for ci, (key, cfg) in enumerate(CASES.items()):
        model = build(cfg, seed=7000 + ci)
        assert sum(t.numel() for t in model.parameters()) == num_parameters(cfg)
        ids, mask, labels, cls_lab = inputs(cfg, seed=8000 + ci)
        logits, pooled, cls, hidden, rel = model(ids, mask)
        mlm_loss = model.mlm_loss(logits, labels)
        class_loss = model.class_loss(cls, cls_lab)
        names, params = zip(*model.named_parameters())
        grads = dict(zip(names, torch.autograd.grad(mlm_loss + class_loss, params, allow_unused=True)))
        # the padding row gets no gradient; a frozen row is stored as zeros
        # SELF-CHECK against the loop transcription
        p = {n: t.detach().clone().requires_grad_(True) for n, t in model.named_parameters()}
        l2, p2, c2, h2, r2 = naive_forward(cfg, p, ids, mask)
        worst = max(close(l2, logits, f"{key} logits"), close(p2, pooled, f"{key} pooled"),
                    close(c2, cls, f"{key} class logits"))
        for l in range(len(hidden)):
            worst = max(worst, close(h2[l], hidden[l], f"{key} hidden {l}"))
        for l in range(len(rel)):
            worst = max(worst, close(r2[l], rel[l], f"{key} relation {l}"))
        loss2 = (F.cross_entropy(l2.reshape(-1, l2.shape[-1]), labels.reshape(-1))
                 + F.cross_entropy(c2, cls_lab))
        g2 = torch.autograd.grad(loss2, [p[n] for n in names])
        for n, g in zip(names, g2):
            if n == "embeddings.weight":
                g = g.clone()
                g[cfg["pad_token_id"]] = 0  # nn.Embedding(padding_idx) freezes that row
            worst = max(worst, close(g, grads[n], f"{key} grad {n}"))
        # docs/math.md#starsaber-our-reading properties of the reference itself
        for A in rel:
            assert A.diagonal(dim1=1, dim2=2).abs().max() == 0, "A_ii must be 0"
            assert A[mask[:, None, :].expand_as(A) == 0].abs().max() == 0, "padded keys must get 0"
            assert A[2, 0].abs().max() == 0, "a lonely token has no admissible key"
        assert grads["embeddings.weight"][cfg["pad_token_id"]].abs().max() == 0
        pre = f"case_{key}."
        for n, t in model.named_parameters():
            tensors[pre + "param." + n] = t.detach().clone()
        tensors.update({pre + "input_ids": ids, pre + "attention_mask": mask,
                        pre + "mlm_labels": labels, pre + "class_labels": cls_lab,
                        pre + "token_logits": logits.detach(), pre + "pooled": pooled.detach(),
                        pre + "class_logits": cls.detach(),
                        pre + "mlm_loss": mlm_loss.detach().view(1),
                        pre + "class_loss": class_loss.detach().view(1)})
        for l, h in enumerate(hidden):
            tensors[pre + f"hidden.{l}"] = h.detach()
        for l, A in enumerate(rel):
            tensors[pre + f"relation.{l}"] = A.detach()
        for n in names:
            tensors[pre + "grad." + n] = grads[n]
        meta[pre + "config"] = json.dumps(cfg, sort_keys=True)
        print(f"case_{key}: mlm loss {mlm_loss.item():.6f} class loss {class_loss.item():.6f}; "
              f"self-check worst abs err {worst:.2e}")
    out = os.path.join(DATA, "starsaber_golden.safetensors")
    write_safetensors(out, tensors, meta)
    print(f"wrote {os.path.relpath(out, ROOT)}: {len(tensors)} tensors, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
