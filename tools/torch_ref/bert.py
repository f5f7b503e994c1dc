# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch reference of docs/math.md#bert-style-encoder: a BERT-style encoder with HuggingFace
``BertForPreTraining`` semantics (BertModel + MLM head + NSP head), written by
hand because the ``transformers`` package is not available here. Parameter names,
shapes and math are HuggingFace's (transformers 4.x, modeling_bert.py,
position_embedding_type "absolute", hidden_act "gelu", no cross-attention):

  BertEmbeddings    word[ids] + position[arange(L)] + token_type[tt] -> LayerNorm -> dropout
  BertSelfAttention query/key/value Linear with bias, scores q k^T / sqrt(D) + ext_mask,
                    ext_mask = (1 - m) * finfo(dtype).min on padded keys, softmax, dropout
  BertSelfOutput    LayerNorm(dropout(dense(ctx)) + x)
  BertIntermediate  gelu(dense(a))  (exact erf gelu)
  BertOutput        LayerNorm(dropout(dense(i)) + a)
  BertPooler        tanh(dense(h[:, 0]))
  MLM head          cls.predictions.transform.{dense, gelu, LayerNorm}, decoder tied to
                    the word embeddings + cls.predictions.bias
  NSP head          cls.seq_relationship Linear(d, 2)
  losses            cross-entropy, ignore index -100

RSA-BERT (docs/math.md#recurrence-encoding-matrices-rem and #rsa-attention-and-the-gate, §5): with config["attention"] == "rsa", the first Hr heads of
every layer mix an UNMASKED REM into the attention probabilities:
  O_h = (1 - sigmoid(mu_h)) * dropout(A_h) V_h + sigmoid(mu_h) * P_h V_h
where A_h uses the additive finfo.min mask above and P_h has the padded key
columns zeroed (torch_ref.rem.rem_matrix with key_padding). The REM parameters
live at bert.encoder.layer.N.attention.self.rem.{eta,nu,theta,mu}.

config is a dict with HuggingFace BertConfig keys plus, for RSA, "attention",
"rem_spec" (a torch_ref.rem spec dict; masked is forced to False) and "gate"
("head" | "layer").
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_ref import rem as rem_ref  # noqa: E402

DEFAULT_CONFIG = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                      max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
                      layer_norm_eps=1e-12, pad_token_id=0, attention="softmax",
                      rem_spec=None, gate="head")


class Holder(nn.Module):
    """A module that only carries children under fixed names."""

    def forward(self, *a):  # pragma: no cover
        raise NotImplementedError


class RemParams(nn.Module):
    def __init__(self, spec, gate):
        super().__init__()
        s = rem_ref.normalize_spec(dict(spec, masked=False))
        self.spec = s
        hr = rem_ref.num_heads(s)
        ne = s["regular"] + s["dilated_regular"]
        nc = s["cyclic"] + s["dilated_cyclic"]
        if ne:
            self.eta = nn.Parameter(torch.zeros(ne))
        else:
            self.eta = None
        if nc:
            self.nu = nn.Parameter(torch.zeros(nc))
            self.theta = nn.Parameter(torch.zeros(nc))
        else:
            self.nu = self.theta = None
        self.mu = nn.Parameter(torch.zeros(hr if gate == "head" else 1))

    def reset_parameters(self):
        """docs/math.md#initialisation-and-checkpoint-names ranges: eta ~ U([-2,-1] u [1,2]), nu ~ U(1,2), theta = pi/4, mu ~ U(-3,3)."""
        with torch.no_grad():
            if self.eta is not None:
                u = torch.empty_like(self.eta).uniform_(1, 2)
                sign = torch.where(torch.rand_like(self.eta) < 0.5, -1.0, 1.0)
                self.eta.copy_(u * sign)
            if self.nu is not None:
                self.nu.uniform_(1, 2)
                self.theta.fill_(math.pi / 4)
            self.mu.uniform_(-3, 3)


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden_size"]
        self.H = c["num_attention_heads"]
        self.D = d // self.H
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.dropout = nn.Dropout(c["attention_probs_dropout_prob"])
        self.rsa = c.get("attention", "softmax") == "rsa"
        if self.rsa:
            self.rem = RemParams(c["rem_spec"], c.get("gate", "head"))

    def split(self, x):
        B, L, _ = x.shape
        return x.view(B, L, self.H, self.D).permute(0, 2, 1, 3)   # [B, H, L, D]

    def forward(self, x, ext_mask, key_padding):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        S = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.D)
        if ext_mask is not None:
            S = S + ext_mask
        A = self.dropout(torch.softmax(S, dim=-1))
        O = torch.matmul(A, v)                                      # [B, H, L, D]
        if self.rsa:
            r = self.rem
            hr = rem_ref.num_heads(r.spec)
            L = x.shape[1]
            P = rem_ref.rem_matrix(r.spec, r.eta, r.nu, r.theta, L, L, key_padding)
            Y = torch.matmul(P, v[:, :hr])
            mixed = rem_ref.gate(O[:, :hr], Y, r.mu.reshape(1, -1, 1, 1))
            O = mixed if hr == self.H else torch.cat([mixed, O[:, hr:]], 1)
        B, _, L, _ = O.shape
        return O.permute(0, 2, 1, 3).reshape(B, L, self.H * self.D)


class DenseLN(nn.Module):
    """BertSelfOutput / BertOutput: LayerNorm(dropout(dense(h)) + input)."""

    def __init__(self, d_in, d, c):
        super().__init__()
        self.dense = nn.Linear(d_in, d)
        self.LayerNorm = nn.LayerNorm(d, eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, h, inp):
        return self.LayerNorm(self.dropout(self.dense(h)) + inp)


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, di = c["hidden_size"], c["intermediate_size"]
        self.attention = Holder()
        self.attention.self = BertSelfAttention(c)
        self.attention.output = DenseLN(d, d, c)
        self.intermediate = Holder()
        self.intermediate.dense = nn.Linear(d, di)
        self.output = DenseLN(di, d, c)

    def forward(self, x, ext_mask, key_padding):
        a = self.attention.output(self.attention.self(x, ext_mask, key_padding), x)
        i = F.gelu(self.intermediate.dense(a))
        return self.output(i, a)


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], d, padding_idx=c["pad_token_id"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], d)
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], d)
        self.LayerNorm = nn.LayerNorm(d, eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, ids, tt):
        L = ids.shape[1]
        pos = torch.arange(L, device=ids.device).unsqueeze(0)
        e = self.word_embeddings(ids) + self.token_type_embeddings(tt) + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(e))


class BertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = Holder()
        self.encoder.layer = nn.ModuleList([BertLayer(c) for _ in range(c["num_hidden_layers"])])
        self.pooler = Holder()
        self.pooler.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, ids, attention_mask=None, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        h = self.embeddings(ids, token_type_ids)
        dtype = h.dtype
        ext_mask = key_padding = None
        if attention_mask is not None:
            m = attention_mask.to(dtype)[:, None, None, :]            # [B, 1, 1, L]
            ext_mask = (1.0 - m) * torch.finfo(dtype).min
            key_padding = attention_mask == 0                          # [B, L]
        hidden = [h]
        for layer in self.encoder.layer:
            h = layer(h, ext_mask, key_padding)
            hidden.append(h)
        pooled = torch.tanh(self.pooler.dense(h[:, 0]))
        return h, pooled, hidden


class BertForPreTraining(nn.Module):
    """HF BertForPreTraining names: bert.*, cls.predictions.*, cls.seq_relationship.*"""

    def __init__(self, config):
        super().__init__()
        c = dict(DEFAULT_CONFIG)
        c.update(config)
        self.config = c
        d = c["hidden_size"]
        self.bert = BertModel(c)
        self.cls = Holder()
        self.cls.predictions = Holder()
        self.cls.predictions.bias = nn.Parameter(torch.zeros(c["vocab_size"]))
        self.cls.predictions.transform = Holder()
        self.cls.predictions.transform.dense = nn.Linear(d, d)
        self.cls.predictions.transform.LayerNorm = nn.LayerNorm(d, eps=c["layer_norm_eps"])
        self.cls.seq_relationship = nn.Linear(d, 2)
        self.init_weights()

    def init_weights(self):
        """HF _init_weights: N(0, initializer_range) Linear/Embedding weights, zero
        biases, LayerNorm 1/0, padding row zeroed; REM by docs/math.md#recurrence-encoding-matrices-rem."""
        std = self.config["initializer_range"]
        with torch.no_grad():
            for mod in self.modules():
                if isinstance(mod, nn.Linear):
                    mod.weight.normal_(0.0, std)
                    mod.bias.zero_()
                elif isinstance(mod, nn.Embedding):
                    mod.weight.normal_(0.0, std)
                    if mod.padding_idx is not None:
                        mod.weight[mod.padding_idx].zero_()
                elif isinstance(mod, nn.LayerNorm):
                    mod.weight.fill_(1.0)
                    mod.bias.zero_()
                elif isinstance(mod, RemParams):
                    mod.reset_parameters()
            self.cls.predictions.bias.zero_()

    def forward(self, ids, attention_mask=None, token_type_ids=None):
        h, pooled, hidden = self.bert(ids, attention_mask, token_type_ids)
        t = self.cls.predictions.transform
        x = t.LayerNorm(F.gelu(t.dense(h)))
        mlm = x @ self.bert.embeddings.word_embeddings.weight.t() + self.cls.predictions.bias
        nsp = self.cls.seq_relationship(pooled)
        return mlm, nsp, pooled, hidden

    @staticmethod
    def mlm_loss(logits, labels):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=-100)

    @staticmethod
    def nsp_loss(logits, labels):
        return F.cross_entropy(logits, labels)
