# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/srupp_adaptive.safetensors: SRU++ as the official
WikiText-103 script builds it (github.com/asappresearch/sru, branch
3.0.0-dev, experiments/srupp_experiments/train_wt103.py: class Model), with the
official AdaptiveEmbedding and AdaptiveLogSoftmax of that folder's
embedding.py (a copy outside this repository) and the SRU++ layers of
tools/torch_ref/srupp.py (checked against the official layers by
make_srupp_goldens.py), over segments that carry memory and cell states:

    python tools/goldens/make_srupp_adaptive_goldens.py /path/to/sru/experiments/srupp_experiments

Needs PyTorch (Debian's python3-torch or any 2.x). Deterministic (fixed seeds,
CPU, float64, dropout 0); the file is rewritten byte-identical.

The model, as train_wt103.py wires it: output_layer = AdaptiveLogSoftmax(n_token,
n_e, n_d, cutoffs, div_val), embedding_layer = AdaptiveEmbedding(... emb_weights =
the output layers' weights, proj_weights = output_layer.out_projs, scale_emb = not
layer_norm); loss = output_layer(drop(h), y) per position (keep_order=True here so
that the positions line up; the mean is the same either way).

Cases X (batch 2, 3 segments of 5 tokens):
  a: vocabulary 20, cutoffs 8 14, n_e 8, div_val 2, d 12, d' 6, 3 layers, attention
     in layer 1, mem_len 5, layer_norm (embedding not scaled)
  b: vocabulary 17, cutoffs 6, n_e 12 (= d), div_val 1, 2 layers with attention,
     mem_len 7, no layer_norm (embedding scaled by sqrt(d))

Tensors (format "remora-golden-srupp-adaptive", version 1), batch-major:
  case_X.param.<p>         every parameter under its official name (shared tensors
                           once: output_layer.*)
  case_X.seg{s}.ids, .targets   I64 [B, L]
  case_X.seg{s}.nll        [B, L] -log p(target);  .loss [1] their mean
  case_X.seg{s}.hidden     [B, L, d]
  case_X.seg{s}.mems.{l}   [B, M', d];  .cells.{l} [B, d]
  case_X.grad.<p>          d(segment 2's loss)/dp
  __metadata__ "case_X.config": the sizes (JSON)
Initialisation: the official one, then LayerNorm weights N(1, 0.3), every
bias + N(0, 0.1) and alpha U(0.5, 1.5), so that every parameter matters.
"""
import json
import os
import sys

import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from torch_ref.srupp import SRUpp  # noqa: E402
from torch_ref.safetensors_io import save as write_safetensors  # noqa: E402
from make_srupp_goldens import perturb  # noqa: E402

VERSION = "1"
N_SEG, BATCH, TGT_LEN = 3, 2, 5
CASES = {
    "a": dict(n_token=20, cutoffs=[8, 14], d_embed=8, div_val=2, d_model=12, d_attn=6, n_layer=3,
              attn_every=2, mem_len=5, layer_norm=True),
    "b": dict(n_token=17, cutoffs=[6], d_embed=12, div_val=1, d_model=12, d_attn=6, n_layer=2,
              attn_every=1, mem_len=7, layer_norm=False),
}


def build(cfg, official, seed):
    AdaptiveEmbedding, AdaptiveLogSoftmax = official.AdaptiveEmbedding, official.AdaptiveLogSoftmax

    class Model(nn.Module):
        # train_wt103.py's Model: the same modules, ties and initialisation
        def __init__(self):
            super().__init__()
            self.n_d, self.depth, self.mem_len = cfg["d_model"], cfg["n_layer"], cfg["mem_len"]
            self.rnn = SRUpp(cfg["d_model"], cfg["d_model"], cfg["d_attn"], cfg["n_layer"],
                             attention_every_n_layers=cfg["attn_every"], layer_norm=cfg["layer_norm"])
            self.output_layer = AdaptiveLogSoftmax(cfg["n_token"], cfg["d_embed"], cfg["d_model"],
                                                   list(cfg["cutoffs"]), div_val=cfg["div_val"],
                                                   keep_order=True)
            shared = [layer.weight for layer in self.output_layer.out_layers]
            self.embedding_layer = AdaptiveEmbedding(cfg["n_token"], cfg["d_embed"], cfg["d_model"],
                                                     list(cfg["cutoffs"]), div_val=cfg["div_val"],
                                                     emb_weights=shared,
                                                     proj_weights=self.output_layer.out_projs,
                                                     scale_emb=not cfg["layer_norm"])
            init_range = (3.0 / self.n_d) ** 0.5
            for p in self.output_layer.out_layers.parameters():
                if p.dim() > 1:
                    p.data.uniform_(-init_range, init_range)
                else:
                    p.data.zero_()
            for p in self.output_layer.out_projs.parameters():
                nn.init.xavier_uniform_(p)

        def forward(self, x, y, hidden, memory):
            L, B = x.shape
            M = 0 if memory is None else memory[0].size(0)
            ones = torch.ones(M + L, M + L, dtype=torch.float64)
            attn_mask = (torch.triu(ones, diagonal=1) * -10000.0)[M:M + L, :M + L]
            emb = self.embedding_layer(x)
            h, new_hidden, inputs = self.rnn(emb, hidden, memory, attn_mask)
            nll = self.output_layer(h.reshape(-1, h.size(2)), y.reshape(-1), keep_order=True)
            new_mem = []
            for i, inp in enumerate(inputs):
                full = inp.detach() if memory is None else torch.cat([memory[i], inp.detach()], 0)
                new_mem.append(full[-self.mem_len:])
            return nll.view(L, B), h, new_hidden.detach(), new_mem

    torch.manual_seed(seed)
    m = Model().double()
    perturb(m)
    m.eval()
    return m


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_srupp_adaptive_goldens.py /path/to/sru/experiments/srupp_experiments")
    sys.path.insert(0, sys.argv[1])
    import embedding as official  # the official embedding.py

    # The official AdaptiveEmbedding builds its output in torch.float (float32)
    # outside autocast; it runs here with torch.float standing for float64, so
    # that the golden is exact in float64. Nothing else of torch changes.
    class Float64Torch:
        float = torch.float64

        def __getattr__(self, name):
            return getattr(torch, name)
    official.torch = Float64Torch()

    torch.set_default_dtype(torch.float64)
    tensors, meta = [], {"format": "remora-golden-srupp-adaptive", "version": VERSION,
                         "cases": ",".join(CASES)}
    for key, cfg in CASES.items():
        m = build(cfg, official, 7 + ord(key))
        pre = f"case_{key}."
        names = [n for n, _ in m.named_parameters()]
        assert not any(n.startswith("embedding_layer.") for n in names), names
        for n, p in m.named_parameters():
            tensors.append((pre + "param." + n, p.detach().clone()))
        g = torch.Generator().manual_seed(11 + ord(key))
        stream = torch.randint(0, cfg["n_token"], (BATCH, N_SEG * TGT_LEN + 1), generator=g)
        hidden = torch.zeros(cfg["n_layer"], BATCH, cfg["d_model"])
        mem = None
        for s in range(N_SEG):
            ids = stream[:, s * TGT_LEN:(s + 1) * TGT_LEN]
            tgt = stream[:, s * TGT_LEN + 1:(s + 1) * TGT_LEN + 1]
            m.zero_grad()
            nll, h, hidden, mem = m(ids.t().contiguous(), tgt.t().contiguous(), hidden, mem)
            loss = nll.mean()
            loss.backward()
            sg = pre + f"seg{s}."
            tensors += [(sg + "ids", ids.contiguous()), (sg + "targets", tgt.contiguous()),
                        (sg + "nll", nll.detach().t().contiguous()), (sg + "loss", loss.detach().view(1)),
                        (sg + "hidden", h.detach().transpose(0, 1).contiguous())]
            for l in range(cfg["n_layer"]):
                tensors.append((sg + f"mems.{l}", mem[l].transpose(0, 1).contiguous()))
                tensors.append((sg + f"cells.{l}", hidden[l].contiguous()))
        for n, p in m.named_parameters():
            tensors.append((pre + "grad." + n, p.grad.detach().clone()))
        meta[pre + "config"] = json.dumps(cfg)
    out = os.path.join(ROOT, "tests", "data", "srupp_adaptive.safetensors")
    write_safetensors(out, [(n, t.detach().contiguous()) for n, t in tensors], meta)
    print("wrote", out)


if __name__ == "__main__":
    main()
