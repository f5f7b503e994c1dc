# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch (1.13) reference of docs/math.md#starsaber-our-reading: StarSaber, written plainly from the mathematics
(no official code is public). Same parameter names, shapes and choices as
models/starsaber.h, so a state_dict moves between the two unchanged.

Per layer l (h^0 = x = dropout(E[ids]); no positions, no LayerNorm, no FFN):

  S_ij = s * h_i W_b h_j            s = 1/sqrt(d) when scale_scores, else 1
  A_ij = softmax over the admissible keys j (j != i, key j not padded);
         a row with no admissible key is all 0
  a_i  = sum_{j<i} A_ij W_past h_j + sum_{j>i} A_ij W_future h_j
  c_i  = dropout(tanh(a_i + U x_i + b))
  plain: h_i <- h_i + alpha * c_i
  gated: z = sigmoid(W_z [a_i; x_i] + b_z);  h_i <- (1 - z) * h_i + z * c_i

Heads: token logits = mlm_head(h^L) (untied Linear d -> V); pooled = mean of h^L
over real tokens (0 for a row without any); class logits =
classifier(dropout(pooled)).

Names: embeddings.weight; layers.N.{W_b, alpha (plain), past.weight,
future.weight, input.weight, input.bias, gate.weight, gate.bias (gated)};
mlm_head.{weight,bias}; classifier.{weight,bias}.

config: dict with vocab_size, d_model, n_layer, gated, dropout, num_classes,
pad_token_id (-1 = none), scale_scores.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class StarSaberLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.gated = cfg["gated"]
        self.scale = 1.0 / math.sqrt(d) if cfg.get("scale_scores", True) else 1.0
        self.p = cfg.get("dropout", 0.0)
        self.W_b = nn.Parameter(torch.empty(d, d))
        if not self.gated:
            self.alpha = nn.Parameter(torch.zeros(1))
        self.past = nn.Linear(d, d, bias=False)
        self.future = nn.Linear(d, d, bias=False)
        self.input = nn.Linear(d, d)
        if self.gated:
            self.gate = nn.Linear(2 * d, d)

    def relation(self, h, pad):
        """h [B, L, d], pad bool [B, L] (True = padded) -> A [B, L, L]."""
        B, L, _ = h.shape
        S = self.scale * torch.einsum("bid,de,bje->bij", h, self.W_b, h)
        eye = torch.eye(L, dtype=torch.bool)
        invalid = eye[None, :, :] | pad[:, None, :]                 # [B, L, L]
        has_key = (~invalid).any(-1, keepdim=True)                  # [B, L, 1]
        Sm = S.masked_fill(invalid, float("-inf"))
        shift = torch.where(has_key, Sm.amax(-1, keepdim=True), torch.zeros_like(S[..., :1])).detach()
        e = torch.exp(Sm - shift)                                   # 0 at invalid entries
        den = e.sum(-1, keepdim=True)
        return e / torch.where(den > 0, den, torch.ones_like(den))

    def forward(self, h, x, pad):
        L = h.shape[1]
        A = self.relation(h, pad)
        before = torch.tril(torch.ones(L, L, dtype=h.dtype), -1)    # j < i
        after = torch.triu(torch.ones(L, L, dtype=h.dtype), 1)      # j > i
        a = (torch.einsum("bij,bjd->bid", A * before, self.past(h))
             + torch.einsum("bij,bjd->bid", A * after, self.future(h)))
        c = F.dropout(torch.tanh(a + self.input(x)), self.p, self.training)
        if self.gated:
            z = torch.sigmoid(self.gate(torch.cat([a, x], -1)))
            return (1 - z) * h + z * c, A
        return h + self.alpha * c, A


class StarSaber(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        d, V = cfg["d_model"], cfg["vocab_size"]
        pad = cfg.get("pad_token_id", -1)
        self.embeddings = nn.Embedding(V, d, padding_idx=pad if pad >= 0 else None)
        self.layers = nn.ModuleList([StarSaberLayer(cfg) for _ in range(cfg["n_layer"])])
        self.mlm_head = nn.Linear(d, V)
        if cfg.get("num_classes", 0) > 0:
            self.classifier = nn.Linear(d, cfg["num_classes"])
        self.reset_parameters()

    def reset_parameters(self):
        """The C++ default (init "xavier"): embeddings N(0, 1), other weight
        matrices Xavier-uniform, biases and alpha 0, the padding row zeroed."""
        with torch.no_grad():
            for n, p in self.named_parameters():
                if n.endswith(".bias") or n.endswith(".alpha"):
                    p.zero_()
                elif n == "embeddings.weight":
                    p.normal_(0.0, 1.0)
                else:
                    nn.init.xavier_uniform_(p)
            pad = self.cfg.get("pad_token_id", -1)
            if pad >= 0:
                self.embeddings.weight[pad].zero_()

    def forward(self, ids, attention_mask=None):
        """ids [B, L]; attention_mask [B, L] (1 = real) or None. Returns
        (token_logits [B, L, V], pooled [B, d], class_logits [B, C] or None,
        hidden: n_layer + 1 tensors [B, L, d], relations: n_layer tensors [B, L, L])."""
        p = self.cfg.get("dropout", 0.0)
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        pad = attention_mask == 0
        x = F.dropout(self.embeddings(ids), p, self.training)
        h, hidden, relations = x, [x], []
        for layer in self.layers:
            h, A = layer(h, x, pad)
            hidden.append(h)
            relations.append(A)
        logits = self.mlm_head(h)
        m = (~pad).to(h.dtype).unsqueeze(-1)
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1.0)
        cls = None
        if hasattr(self, "classifier"):
            cls = self.classifier(F.dropout(pooled, p, self.training))
        return logits, pooled, cls, hidden, relations

    @staticmethod
    def mlm_loss(logits, labels):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)

    @staticmethod
    def class_loss(logits, labels):
        return F.cross_entropy(logits, labels)


def num_parameters(cfg):
    """The closed form of models::starsaber_num_parameters."""
    d, V, C, n = cfg["d_model"], cfg["vocab_size"], cfg.get("num_classes", 0), cfg["n_layer"]
    layer = 4 * d * d + d + (2 * d * d + d if cfg["gated"] else 1)
    return V * d + n * layer + V * d + V + (C * d + C if C > 0 else 0)
