# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/xl_official/: a tiny official Transformer-XL
(github.com/kimiyoung/transformer-xl, pytorch/mem_transformer.py:
MemTransformerLM; a copy outside this repository) with the adaptive input and
softmax tied as the WikiText-103 recipe ties them, converted by
tools/convert_official_xl.py, and its log-probabilities over segments that
carry memory:

    python tools/goldens/make_xl_official_goldens.py /path/to/transformer-xl/pytorch

Needs PyTorch (any 2.x) in a virtual environment outside the repository.

The model: vocabulary 50, cutoffs 10 20 35, div_val 2, d_embed 32, d_model 16
(so every part has a projection), tie_weight, tie_projs [False, True, True,
True] (train.py's for wt103), 2 layers of 2 heads x 8, d_inner 32, mem_len 6,
float64 (the positional frequencies too), seed 0, weights N(0, 0.3) (LayerNorm weights N(1, 0.1)) so that the
outputs are far from uniform. It is saved as train.py saves it
(torch.save(model)) and converted from that file.

Files:
  model.safetensors, config.json  the converter's output (float64 weights)
  expected.safetensors            format "remora-golden-xl-official", version 1:
    ids, targets  i64 [S, B, L] (batch-major, as Remora takes them): S = 3
                  segments of L = 5 tokens for B = 2 streams, in order
    logp          f64 [S, B, L]: log p(target), the official crit(hidden,
                  target, keep_order=True) negated, memory carried from one
                  segment to the next (eval mode)
    log_prob      f64 [S, B, L, 50]: log p of every token (the same crit on
                  each token in turn)
    loss          f64 [S]: the official model(data, target, *mems) loss, mean
"""
import json
import os
import shutil
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OFFICIAL = sys.argv[1]
sys.path.insert(0, os.path.join(ROOT, "tools", "torch_ref"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(OFFICIAL, "utils"))
sys.path.insert(0, OFFICIAL)
import mem_transformer  # noqa: E402  (official)
from convert_official_xl import convert  # noqa: E402
import safetensors_io  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "xl_official")
N_TOKEN, CUTOFFS, DIV_VAL, D_EMBED, D_MODEL = 50, [10, 20, 35], 2, 32, 16
S, B, L, MEM = 3, 2, 5, 6


def official_in_float64():
    # The official code builds its masks with .byte(); PyTorch 2 fills with
    # boolean masks only. The same mask as bool: no number changes.
    torch.Tensor.byte = torch.Tensor.bool
    # Its attention masks the scores as attn_score.float().masked_fill(...)
    # .type_as(attn_score): a float64 model's scores are rounded to float32
    # there (about 1e-8 in the log-probabilities). Kept float64: .float() of a
    # float64 tensor is the tensor itself while the golden is computed (the
    # model is float64 throughout; nothing else calls .float()).
    to_float = torch.Tensor.float
    torch.Tensor.float = lambda t, *a, **k: t if t.dtype == torch.float64 else to_float(t, *a, **k)


def build():
    torch.manual_seed(0)
    m = mem_transformer.MemTransformerLM(
        N_TOKEN, n_layer=2, n_head=2, d_model=D_MODEL, d_head=8, d_inner=32, dropout=0.1, dropatt=0.0,
        tie_weight=True, d_embed=D_EMBED, div_val=DIV_VAL, tie_projs=[False, True, True, True],
        tgt_len=L, ext_len=0, mem_len=MEM, cutoffs=list(CUTOFFS), same_length=False, clamp_len=-1)
    m.double()
    # The official buffer inv_freq is computed in float32 and only cast by
    # double(); Remora computes it in float64. Recomputed here in float64 (the
    # official formula) so that the golden is float64 throughout.
    m.pos_emb.inv_freq = 1 / (10000 ** (torch.arange(0.0, D_MODEL, 2.0, dtype=torch.float64) / D_MODEL))
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "layer_norm.weight" in name:
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.3)
    return m.eval()


def main():
    official_in_float64()
    model = build()
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, "model.pt")
        torch.save(model, path)
        if os.path.isdir(OUT):
            shutil.rmtree(OUT)
        config, n_token = convert(path, OUT, official=OFFICIAL, data="tests/data/wikitext", dtype="f64")
    finally:
        shutil.rmtree(tmp)
    assert n_token == N_TOKEN, n_token
    assert config["model"]["tie_projs"] == [False, True, True, True], config["model"]
    assert config["model"]["cutoffs"] == CUTOFFS and config["model"]["div_val"] == DIV_VAL

    g = torch.Generator().manual_seed(1)
    stream = torch.randint(0, N_TOKEN, (B, S * L + 1), generator=g)
    stream[0, :4] = torch.tensor([0, 10, 20, 35])  # every part of the vocabulary
    ids = torch.stack([stream[:, s * L:(s + 1) * L] for s in range(S)])  # [S, B, L]
    targets = torch.stack([stream[:, s * L + 1:(s + 1) * L + 1] for s in range(S)])
    logp, log_prob, loss = [], [], []
    mems, mems_fwd = model.init_mems(), model.init_mems()
    with torch.no_grad():
        for s in range(S):
            data, target = ids[s].t().contiguous(), targets[s].t().contiguous()  # [L, B]: time-major
            hidden, mems = model._forward(data, mems=mems)
            flat = hidden.reshape(-1, D_MODEL)
            nll = model.crit(flat, target.reshape(-1), keep_order=True).view(L, B)
            logp.append(-nll.t())
            every = torch.stack([-model.crit(flat, torch.full((L * B,), t), keep_order=True)
                                 for t in range(N_TOKEN)], 1).view(L, B, N_TOKEN)
            log_prob.append(every.transpose(0, 1))
            out = model(data, target, *mems_fwd)
            mems_fwd = out[1:]
            loss.append(out[0].mean())
            assert torch.allclose(out[0].mean(), nll.mean(), rtol=0, atol=1e-12)
            assert torch.allclose(every.exp().sum(-1), torch.ones(L, B, dtype=torch.float64), atol=1e-12)
    tensors = [("ids", ids.contiguous()), ("targets", targets.contiguous()),
               ("logp", torch.stack(logp).contiguous()), ("log_prob", torch.stack(log_prob).contiguous()),
               ("loss", torch.stack(loss))]
    safetensors_io.save(os.path.join(OUT, "expected.safetensors"), tensors,
                        {"format": "remora-golden-xl-official", "version": "1",
                         "generator": "tools/goldens/make_xl_official_goldens.py",
                         "config": json.dumps(config["model"])})
    print(f"wrote {OUT}: loss per segment {[round(float(x), 6) for x in loss]}")


if __name__ == "__main__":
    main()
