#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the BERT goldens (docs/math.md#bert-style-encoder) from tools/torch_ref/bert.py (HuggingFace
BertForPreTraining semantics written by hand; transformers is not installed):

  tests/data/golden_bert.safetensors      float64 cases a (softmax) and b (RSA-BERT)
  tests/data/hf_bert_tiny/config.json     a HuggingFace-format model directory
  tests/data/hf_bert_tiny/model.safetensors   (F32, layer 0 LayerNorms named .gamma/.beta)
  tests/data/hf_bert_tiny_expected.safetensors  its expected MLM logits for an ids batch
  tests/data/hf_bert_tiny_ids.json        that ids batch as JSON ([[...], [...]])

Run with Debian's python3-torch:  /usr/bin/python3 tools/goldens/make_bert_goldens.py
Deterministic (fixed seeds, CPU); the files are rewritten byte-identical.
Before writing it checks the reference against an independent einsum/closed-form
transcription (SELF-CHECK) and refuses to write on a mismatch.

CASES (float64, batch 2, L 7, eval mode: dropout probabilities are in the config
but inactive):
  case_a  softmax BERT: vocab 23, hidden 16, 2 layers, 2 heads, intermediate 32,
          max_position 10, type_vocab 2, pad 0, layer_norm_eps 1e-12
  case_b  RSA-BERT: as case_a with 4 heads and an unmasked REM {regular 1, cyclic 1}
          (Hr = 3: regular, cos, sin; head 3 plain), gate per head (mu [3])
Both: row 0 has no padding, row 1 has its last 3 positions padded (attention_mask 0,
ids = pad 0); token types 0 then 1; MLM labels -100 except a few real positions
(one of which is a padded position's neighbour); next-sentence labels [0, 1].
__metadata__: format "remora-golden-bert", version, cases, and case_X.config = the
HF config.json of the case (BertConfig keys; Remora's RSA settings under "remora",
in the layout models::BertConfig::from_hf_json reads).

TENSORS (X = case letter, <p> = HuggingFace parameter name):
  case_X.param.<p>              every parameter (cls.predictions.decoder is tied: not stored)
  case_X.input_ids              I64 [B, L]
  case_X.attention_mask         I64 [B, L]  1 = real token
  case_X.token_type_ids         I64 [B, L]
  case_X.mlm_labels             I64 [B, L]  -100 = ignored
  case_X.next_sentence_label    I64 [B]
  case_X.mlm_logits             F64 [B, L, V]
  case_X.nsp_logits             F64 [B, 2]
  case_X.pooled                 F64 [B, d]
  case_X.hidden.{l}             F64 [B, L, d]  l = 0 (embeddings output) .. num_layers
  case_X.mlm_loss, nsp_loss     F64 [1]
  case_X.grad.<p>               d(mlm_loss + nsp_loss)/dp for every parameter

Initialisation of the goldens (so every tensor matters): Linear/Embedding weights
N(0, 0.3) (the padding row of the word embeddings is NOT zeroed, so the test sees
that it gets gradient only through the tied decoder), biases (incl. cls.predictions.bias)
N(0, 0.1), LayerNorm weights N(1, 0.3) and biases N(0, 0.1); REM: docs/math.md#initialisation-and-checkpoint-names ranges
with theta = pi/4 + U(-0.3, 0.3) and mu ~ U(-1.5, 1.5).
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
from torch_ref.bert import BertForPreTraining  # noqa: E402
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402

VERSION = "1"
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".."))
DATA = os.path.join(ROOT, "tests", "data")
B, L = 2, 7

BASE = dict(vocab_size=23, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=10, type_vocab_size=2,
            initializer_range=0.02, layer_norm_eps=1e-12, pad_token_id=0)
CASES = {
    "a": dict(BASE),
    "b": dict(BASE, num_attention_heads=4, attention="rsa",
              rem_spec={"regular": 1, "cyclic": 1}, gate="head"),
}
INIT = dict(weight_std=0.3, ln_weight_std=0.3, bias_std=0.1, theta_jitter=0.3, mu_range=1.5)


def hf_config(cfg):
    """The config.json of a case: BertConfig keys, RSA settings under "remora"."""
    j = {k: cfg[k] for k in BASE}
    j.update(model_type="bert", architectures=["BertForPreTraining"],
             position_embedding_type="absolute")
    if cfg.get("attention") == "rsa":
        j["remora"] = {"attention": {"type": "rsa", "rem": dict(cfg["rem_spec"]),
                                     "gate": cfg["gate"]}}
    return j


def build(cfg, seed):
    torch.manual_seed(seed)
    model = BertForPreTraining(cfg).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".rem." in name:
                continue
            if "LayerNorm.weight" in name:
                p.normal_(1.0, INIT["ln_weight_std"])
            elif name.endswith("bias"):
                p.normal_(0.0, INIT["bias_std"])
            else:
                p.normal_(0.0, INIT["weight_std"])
        for layer in model.bert.encoder.layer:
            sa = layer.attention.self
            if sa.rsa:
                sa.rem.reset_parameters()
                if sa.rem.theta is not None:
                    sa.rem.theta.add_(torch.empty_like(sa.rem.theta).uniform_(
                        -INIT["theta_jitter"], INIT["theta_jitter"]))
                sa.rem.mu.uniform_(-INIT["mu_range"], INIT["mu_range"])
    model.eval()
    return model


def inputs(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    V = cfg["vocab_size"]
    ids = torch.randint(1, V, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.int64)
    mask[1, L - 3:] = 0
    ids[1, L - 3:] = cfg["pad_token_id"]
    tt = torch.zeros(B, L, dtype=torch.int64)
    tt[:, 3:] = 1
    tt[1, L - 3:] = 0
    labels = torch.full((B, L), -100, dtype=torch.int64)
    for b, i in [(0, 1), (0, 4), (0, 6), (1, 0), (1, 3)]:
        labels[b, i] = torch.randint(1, V, (1,), generator=g).item()
    nsp = torch.tensor([0, 1], dtype=torch.int64)
    return ids, mask, tt, labels, nsp


# ---------------------------------------------------------------- independent transcription

def naive_forward(cfg, p, ids, mask, tt):
    """Einsum form; REM entries from closed-form f(|n|) per entry; -inf masking
    (equal to finfo.min when a row has a real key)."""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    D = d // H
    eps = cfg["layer_norm_eps"]
    ln = lambda x, pre: F.layer_norm(x, (d,), p[pre + ".weight"], p[pre + ".bias"], eps)
    lin = lambda x, pre: x @ p[pre + ".weight"].t() + p[pre + ".bias"]
    gelu = lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    h = (p["bert.embeddings.word_embeddings.weight"][ids]
         + p["bert.embeddings.position_embeddings.weight"][:L].unsqueeze(0)
         + p["bert.embeddings.token_type_embeddings.weight"][tt])
    h = ln(h, "bert.embeddings.LayerNorm")
    pad = mask == 0
    for l in range(cfg["num_hidden_layers"]):
        pre = f"bert.encoder.layer.{l}."
        q = lin(h, pre + "attention.self.query").view(B, L, H, D)
        k = lin(h, pre + "attention.self.key").view(B, L, H, D)
        v = lin(h, pre + "attention.self.value").view(B, L, H, D)
        S = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(D)
        S = S.masked_fill(pad[:, None, None, :], float("-inf"))
        A = torch.softmax(S, -1)
        O = torch.einsum("bhij,bjhd->bihd", A, v)
        if cfg.get("attention") == "rsa":
            r = pre + "attention.self.rem."
            lam = torch.tanh(p[r + "eta"][0])
            gam = torch.sigmoid(p[r + "nu"][0])
            th = p[r + "theta"][0]
            fs = [lambda n: lam ** n, lambda n: gam ** n * torch.cos(n * th),
                  lambda n: gam ** n * torch.sin(n * th)]
            heads = []
            for hh in range(H):
                if hh < 3:
                    P = torch.stack([torch.stack([
                        torch.stack([fs[hh](abs(i - j)) if i != j and not pad[b, j]
                                     else torch.zeros((), dtype=torch.float64)
                                     for j in range(L)]) for i in range(L)]) for b in range(B)])
                    g = torch.sigmoid(p[r + "mu"][hh])
                    heads.append((1 - g) * O[:, :, hh] + g * torch.einsum("bij,bjd->bid", P, v[:, :, hh]))
                else:
                    heads.append(O[:, :, hh])
            O = torch.stack(heads, 2)
        a = ln(h + lin(O.reshape(B, L, d), pre + "attention.output.dense"),
               pre + "attention.output.LayerNorm")
        i = gelu(lin(a, pre + "intermediate.dense"))
        h = ln(a + lin(i, pre + "output.dense"), pre + "output.LayerNorm")
    pooled = torch.tanh(lin(h[:, 0], "bert.pooler.dense"))
    x = ln(gelu(lin(h, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    mlm = x @ p["bert.embeddings.word_embeddings.weight"].t() + p["cls.predictions.bias"]
    nsp = lin(pooled, "cls.seq_relationship")
    return mlm, nsp, pooled


def close(a, b, what, tol=1e-12):
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
    err = (a - b).abs().max().item()
    scale = max(1.0, b.abs().max().item())
    assert err <= tol * scale, f"{what}: max abs err {err:.3e}"
    return err


# ---------------------------------------------------------------- main

def golden_cases():
    tensors = {}
    meta = {"format": "remora-golden-bert", "version": VERSION,
            "generator": "tools/goldens/make_bert_goldens.py", "torch": torch.__version__,
            "cases": ",".join(CASES)}
    for ci, (key, cfg) in enumerate(CASES.items()):
        model = build(cfg, seed=3000 + ci)
        ids, mask, tt, labels, nsp_lab = inputs(cfg, seed=4000 + ci)
        mlm, nsp, pooled, hidden = model(ids, mask, tt)
        mlm_loss = model.mlm_loss(mlm, labels)
        nsp_loss = model.nsp_loss(nsp, nsp_lab)
        names, params = zip(*model.named_parameters())
        grads = dict(zip(names, torch.autograd.grad(mlm_loss + nsp_loss, params)))
        # self-check
        p = {n: t.detach().clone().requires_grad_(True) for n, t in model.named_parameters()}
        m2, n2, p2 = naive_forward(cfg, p, ids, mask, tt)
        worst = max(close(m2, mlm, f"case_{key} mlm"), close(n2, nsp, f"case_{key} nsp"),
                    close(p2, pooled, f"case_{key} pooled"))
        l2 = F.cross_entropy(m2.reshape(-1, m2.shape[-1]), labels.reshape(-1)) + F.cross_entropy(n2, nsp_lab)
        g2 = torch.autograd.grad(l2, [p[n] for n in names])
        for n, g in zip(names, g2):
            worst = max(worst, close(g, grads[n], f"case_{key} grad {n}"))
        assert grads["bert.embeddings.word_embeddings.weight"][0].abs().max() > 0
        pre = f"case_{key}."
        for n, t in model.named_parameters():
            tensors[pre + "param." + n] = t.detach().clone()
        tensors.update({pre + "input_ids": ids, pre + "attention_mask": mask,
                        pre + "token_type_ids": tt, pre + "mlm_labels": labels,
                        pre + "next_sentence_label": nsp_lab, pre + "mlm_logits": mlm.detach(),
                        pre + "nsp_logits": nsp.detach(), pre + "pooled": pooled.detach(),
                        pre + "mlm_loss": mlm_loss.detach().view(1),
                        pre + "nsp_loss": nsp_loss.detach().view(1)})
        for l, h in enumerate(hidden):
            tensors[pre + f"hidden.{l}"] = h.detach()
        for n in names:
            tensors[pre + "grad." + n] = grads[n]
        meta[pre + "config"] = json.dumps(hf_config(cfg), sort_keys=True)
        print(f"case_{key}: mlm loss {mlm_loss.item():.6f} nsp loss {nsp_loss.item():.6f}; "
              f"self-check worst abs err {worst:.2e}")
    out = os.path.join(DATA, "golden_bert.safetensors")
    write_safetensors(out, tensors, meta)
    print(f"wrote {os.path.relpath(out, ROOT)}: {len(tensors)} tensors, {os.path.getsize(out)} bytes")


def hf_fixture():
    """A HuggingFace-format directory (F32, like real checkpoints) with legacy
    .gamma/.beta names on layer 0 and the embeddings, plus its expected logits."""
    cfg = dict(BASE, vocab_size=30, hidden_size=16, num_attention_heads=2,
               max_position_embeddings=16)
    torch.manual_seed(5000)
    model = BertForPreTraining(dict(cfg, initializer_range=0.2))   # HF init, wider spread
    with torch.no_grad():   # non-trivial biases and LayerNorms
        for n, t in model.named_parameters():
            if n.endswith("bias"):
                t.normal_(0.0, 0.1)
            elif "LayerNorm.weight" in n:
                t.normal_(1.0, 0.2)
    model.eval()
    g = torch.Generator().manual_seed(5001)
    ids = torch.randint(1, cfg["vocab_size"], (2, 9), generator=g)
    with torch.no_grad():
        mlm32, _, _, _ = model(ids)
        m64 = BertForPreTraining(cfg).double()
        m64.load_state_dict(model.state_dict())
        m64.eval()
        mlm64, _, _, _ = m64(ids)
    state = {}
    for n, t in model.state_dict().items():
        if n.startswith("bert.encoder.layer.0.") or n.startswith("bert.embeddings."):
            n = n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[n] = t.detach().clone()
    # as HF saves it: the tied decoder weight and its bias alias appear as well
    state["cls.predictions.decoder.weight"] = model.bert.embeddings.word_embeddings.weight.detach().clone()
    state["cls.predictions.decoder.bias"] = model.cls.predictions.bias.detach().clone()
    d = os.path.join(DATA, "hf_bert_tiny")
    os.makedirs(d, exist_ok=True)
    j = hf_config(cfg)
    j["initializer_range"] = 0.2
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(j, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"), state, {"format": "pt"})
    write_safetensors(os.path.join(DATA, "hf_bert_tiny_expected.safetensors"),
                      {"input_ids": ids, "mlm_logits": mlm32.detach(),
                       "mlm_logits_f64": mlm64.detach()},
                      {"format": "remora-hf-bert-tiny-expected", "version": VERSION,
                       "generator": "tools/goldens/make_bert_goldens.py",
                       "note": "mlm_logits: float32 forward of hf_bert_tiny (no attention_mask, "
                               "token types 0); mlm_logits_f64: the same weights in float64"})
    with open(os.path.join(DATA, "hf_bert_tiny_ids.json"), "w") as f:
        json.dump(ids.tolist(), f)
        f.write("\n")
    print(f"wrote tests/data/hf_bert_tiny/ and its expected logits "
          f"(f32 vs f64 max diff {(mlm32.double() - mlm64).abs().max().item():.2e})")


def main():
    torch.set_default_dtype(torch.float64)
    golden_cases()
    torch.set_default_dtype(torch.float32)
    hf_fixture()


if __name__ == "__main__":
    main()
