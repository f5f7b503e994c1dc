# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/adaptive_golden.safetensors: the official Transformer-XL's
AdaptiveEmbedding and ProjectedAdaptiveLogSoftmax (github.com/kimiyoung/
transformer-xl, pytorch/; a copy outside this repository) on small float64
problems, with their parameters under the official names, inputs, outputs
and the gradients of sum(nll).

    python tools/goldens/make_adaptive_goldens.py /path/to/transformer-xl/pytorch

Needs PyTorch (any 2.x) in a virtual environment outside the repository.
Cases (prefix "<case>."):
  div4_tied:  n_token 50, d_embed 16, d_proj 12, cutoffs 10 20 35, div_val 2,
              tie_weight, tie_projs [False, True, True, True] (the WikiText-103 ties)
  div1_proj:  n_token 30, d_embed 8, d_proj 12, cutoffs 10 20, div_val 1, no ties
  div1_tied:  as div1_proj with tie_weight and tie_projs [False, True, True]
"""
import os
import sys

import torch

# The official folder first: tools/torch_ref has a mem_transformer.py of its own.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_ref"))
sys.path.insert(0, os.path.join(sys.argv[1], "utils"))
sys.path.insert(0, sys.argv[1])
from mem_transformer import AdaptiveEmbedding  # noqa: E402  (official)
from utils.proj_adaptive_softmax import ProjectedAdaptiveLogSoftmax  # noqa: E402  (official)
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "tests", "data", "adaptive_golden.safetensors")
CASES = {
    "div4_tied": dict(n_token=50, d_embed=16, d_proj=12, cutoffs=[10, 20, 35], div_val=2,
                      tie_weight=True, tie_projs=[False, True, True, True]),
    "div1_proj": dict(n_token=30, d_embed=8, d_proj=12, cutoffs=[10, 20], div_val=1,
                      tie_weight=False, tie_projs=[False, False, False]),
    "div1_tied": dict(n_token=30, d_embed=8, d_proj=12, cutoffs=[10, 20], div_val=1,
                      tie_weight=True, tie_projs=[False, True, True]),
}


def build(c):
    emb = AdaptiveEmbedding(c["n_token"], c["d_embed"], c["d_proj"], list(c["cutoffs"]), div_val=c["div_val"])
    crit = ProjectedAdaptiveLogSoftmax(c["n_token"], c["d_embed"], c["d_proj"], list(c["cutoffs"]),
                                       div_val=c["div_val"])
    # MemTransformerLM's ties.
    if c["tie_weight"]:
        for i in range(len(crit.out_layers)):
            crit.out_layers[i].weight = emb.emb_layers[i].weight
    for i, t in enumerate(c["tie_projs"]):
        if t and c["div_val"] == 1 and c["d_proj"] != c["d_embed"]:
            crit.out_projs[i] = emb.emb_projs[0]
        elif t and c["div_val"] != 1:
            crit.out_projs[i] = emb.emb_projs[i]
    for m in (emb, crit):
        m.double()
        for name, p in m.named_parameters():
            with torch.no_grad():
                p.normal_(0, 0.5)
    return emb, crit


def main():
    torch.manual_seed(0)
    out = []
    for name, c in CASES.items():
        emb, crit = build(c)
        N = 40
        # Every part gets targets (and ids), some rows share them.
        ids = torch.randint(0, c["n_token"], (5, 8))
        target = torch.randint(0, c["n_token"], (N,))
        target[: len(c["cutoffs"]) + 1] = torch.tensor([0] + c["cutoffs"])
        hidden = torch.randn(N, c["d_proj"], dtype=torch.float64, requires_grad=True)
        nll = crit(hidden, target, keep_order=True)
        e = emb(ids)
        loss = nll.sum() + (e * torch.linspace(-1, 1, e.numel(), dtype=torch.float64).view_as(e)).sum()
        loss.backward()
        with torch.no_grad():
            logp = torch.stack([-crit(hidden, torch.full((N,), t), keep_order=True)
                                for t in range(c["n_token"])], 1)
        params = dict(emb.named_parameters(prefix="word_emb"))
        params.update(dict(crit.named_parameters(prefix="crit")))
        for k, p in params.items():
            out.append((name + "." + k, p.detach()))
            out.append((name + ".grad." + k, p.grad.detach()))
        out += [(name + ".ids", ids), (name + ".embed", e.detach()), (name + ".hidden", hidden.detach()),
                (name + ".target", target), (name + ".nll", nll.detach()), (name + ".log_prob", logp),
                (name + ".grad.hidden", hidden.grad.detach())]
    safetensors_io.save(OUT, out, metadata={"format": "remora-golden-adaptive", "version": "1", "torch": torch.__version__,
                                            "source": "kimiyoung/transformer-xl pytorch/ (official modules)"})
    print("wrote", OUT, len(out), "tensors")


if __name__ == "__main__":
    main()
