# SPDX-License-Identifier: BSD-3-Clause
"""SRU++ reference in PyTorch 1.13 (docs/math.md#the-sru-elementwise-recurrence): our own re-implementation of the
semantics of the official asappresearch/sru 3.0.0-dev (sru/modules.py: SRUCell,
SRUppProjectedLinear, SRUppAttention, SRUppCell, SRUpp; sru/ops.py:
elementwise_recurrence_naive) and of the enwik8 LM wrapper
(experiments/srupp_experiments/train_enwik8.py: Model), with the official
module structure, so state_dict names are the official ones:

    embedding_layer.weight, output_layer.{weight,bias},
    rnn.rnn_lst.N.{weight_c,bias,scale_x},
    rnn.rnn_lst.N.transform_module.{linear1,linear2[,linear3]}.weight,
    rnn.rnn_lst.N.transform_module.alpha (attention layers),
    rnn.rnn_lst.N.transform_module.layer_norm.{weight,bias}

Time-major [L, B, ...] like the official code. The recurrence is a plain Python
loop over time (the official naive CPU path). Only what Remora implements is
here: one attention head, post-LN in the transform module (attn_layer_norm=True,
normalize_after=True), no per-cell layer norm (layer_norm=False), rescale=False,
has_skip_term=True, no padding masks.

Memory: the official loop hands each layer the previous segment's inputs of that
layer; here new_mem = the last mem_len rows of [mem; input] (the same when
mem_len = segment length; mem_len > L keeps older rows too, as Transformer-XL).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def sru_recurrence(U, x, v, b, c0=None, mask=None, bidirectional=False):
    """U [L, B, D, k] (k = 3: x' = x [L, B, D]; k = 4: x' = U[..., 3], x None),
    v, b [2, D] = (forget; reset), c0 [B, D] or None, mask [B, D] or None.
    Returns h [L, B, D], c [L, B, D], c_last [B, D]. Units [D/2, D) run
    reversed in time when bidirectional. Mask placement as the official code:
    h = x' + (c - x') * mask * r."""
    L, B, D, k = U.shape
    xp = x if k == 3 else U[..., 3]
    dirs = [(0, D // 2, False), (D // 2, D, True)] if bidirectional else [(0, D, False)]
    hs, cs, lasts = [], [], []
    for j0, j1, rev in dirs:
        c = c0[:, j0:j1] if c0 is not None else U.new_zeros(B, j1 - j0)
        m = mask[:, j0:j1] if mask is not None else 1.0
        vf, vr, bf, br = v[0, j0:j1], v[1, j0:j1], b[0, j0:j1], b[1, j0:j1]
        h_t, c_t = [None] * L, [None] * L
        for t in (range(L - 1, -1, -1) if rev else range(L)):
            u = U[t, :, j0:j1]
            f = torch.sigmoid(u[..., 1] + c * vf + bf)
            r = torch.sigmoid(u[..., 2] + c * vr + br)
            c = u[..., 0] + (c - u[..., 0]) * f
            xt = xp[t, :, j0:j1]
            h_t[t] = xt + (c - xt) * m * r
            c_t[t] = c
        hs.append(torch.stack(h_t, 0) if L else U.new_zeros(0, B, j1 - j0))
        cs.append(torch.stack(c_t, 0) if L else U.new_zeros(0, B, j1 - j0))
        lasts.append(c)
    return torch.cat(hs, 2), torch.cat(cs, 2), torch.cat(lasts, 1)


class SRUppProjectedLinear(nn.Module):
    """U = linear2(dropout(LN(linear1(x))))."""

    def __init__(self, in_features, out_features, proj_features, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear1 = nn.Linear(in_features, proj_features, bias=False)
        self.linear2 = nn.Linear(proj_features, out_features, bias=False)
        self.layer_norm = nn.LayerNorm(proj_features)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.linear1.weight)
        nn.init.xavier_uniform_(self.linear2.weight)
        if self.dropout.p > 0:
            self.linear2.weight.data.mul_((1 - self.dropout.p) ** 0.5)

    def forward(self, x, memory=None, attn_mask=None):
        return self.linear2(self.dropout(self.layer_norm(self.linear1(x))))


class SRUppAttention(nn.Module):
    """One head: z = linear1([mem; x]); q = z[M:]; k, v = linear2(z).chunk(2);
    U = linear3(dropout(LN(alpha * softmax(q k^T / sqrt(d') + mask) v + q)))."""

    def __init__(self, in_features, out_features, proj_features, dropout=0.0, attn_dropout=0.0):
        super().__init__()
        self.proj_features = proj_features
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = float(attn_dropout)
        self.linear1 = nn.Linear(in_features, proj_features, bias=False)
        self.linear2 = nn.Linear(proj_features, proj_features * 2, bias=False)
        self.linear3 = nn.Linear(proj_features, out_features, bias=False)
        self.alpha = nn.Parameter(torch.zeros(1))
        self.layer_norm = nn.LayerNorm(proj_features)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.linear1.weight)
        nn.init.xavier_uniform_(self.linear2.weight)
        nn.init.xavier_uniform_(self.linear3.weight)
        self.alpha.data[:] = 0.0
        if self.dropout.p > 0:
            self.linear3.weight.data.mul_((1 - self.dropout.p) ** 0.5)

    def forward(self, x, memory=None, attn_mask=None):
        L, B, _ = x.shape
        M = 0 if memory is None else memory.size(0)
        z = self.linear1(x if memory is None else torch.cat([memory, x], 0))  # [Lk, B, d']
        q = z[M:]                                                              # residual too
        k, v = self.linear2(z).chunk(2, dim=-1)
        qb, kb, vb = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [B, *, d']
        scores = torch.bmm(qb * self.proj_features ** -0.5, kb.transpose(1, 2))  # [B, L, Lk]
        if attn_mask is not None:
            scores = scores + attn_mask.unsqueeze(0)
        w = F.dropout(F.softmax(scores, dim=-1), p=self.attn_dropout, training=self.training)
        a = torch.bmm(w, vb).transpose(0, 1)  # [L, B, d']
        y = self.layer_norm(a * self.alpha + q)
        return self.linear3(self.dropout(y))


class SRUppCell(nn.Module):
    def __init__(self, in_features, hidden_size, proj_size, use_attention, dropout=0.0,
                 attn_dropout=0.0, c_dropout=0.0, highway_bias=-2.0, weight_c_init=1.0,
                 layer_norm=False):
        super().__init__()
        # The official SRUppCell layer_norm (normalize_after False): the
        # transform reads LN(x); x' and the memory stay raw.
        self.layer_norm = nn.LayerNorm(in_features) if layer_norm else None
        self.hidden_size = hidden_size
        self.num_matrices = 3 if in_features == hidden_size else 4
        out = hidden_size * self.num_matrices
        if use_attention:
            self.transform_module = SRUppAttention(in_features, out, proj_size, dropout, attn_dropout)
        else:
            self.transform_module = SRUppProjectedLinear(in_features, out, proj_size, dropout)
        self.c_dropout = c_dropout
        self.highway_bias = highway_bias
        self.weight_c_init = weight_c_init
        self.weight_c = nn.Parameter(torch.zeros(2 * hidden_size))
        self.bias = nn.Parameter(torch.zeros(2 * hidden_size))
        self.register_buffer("scale_x", torch.ones(1))
        self.reset_parameters()

    def reset_parameters(self):
        self.bias.data.zero_()
        self.bias.data[self.hidden_size:] = self.highway_bias
        self.scale_x.data[0] = 1
        self.transform_module.reset_parameters()
        self.weight_c.data.uniform_(-self.weight_c_init, self.weight_c_init)

    def forward(self, x, c0, memory=None, attn_mask=None):
        L, B, _ = x.shape
        d, k = self.hidden_size, self.num_matrices
        xin = self.layer_norm(x) if self.layer_norm is not None else x
        U = self.transform_module(xin, memory=memory, attn_mask=attn_mask).view(L, B, d, k)
        mask = None
        if self.training and self.c_dropout > 0:
            mask = x.new_empty(B, d).bernoulli_(1 - self.c_dropout).div_(1 - self.c_dropout)
        h, _, c_last = sru_recurrence(U, x if k == 3 else None, self.weight_c.view(2, d),
                                      self.bias.view(2, d), c0, mask)
        return h, c_last


class SRUpp(nn.Module):
    def __init__(self, input_size, hidden_size, proj_size, num_layers, dropout=0.0,
                 attn_dropout=0.0, highway_bias=-2.0, attention_every_n_layers=1, layer_norm=False):
        super().__init__()
        self.rnn_lst = nn.ModuleList()
        for i in range(num_layers):
            self.rnn_lst.append(SRUppCell(
                input_size if i == 0 else hidden_size, hidden_size, proj_size,
                (i + 1) % attention_every_n_layers == 0, dropout, attn_dropout,
                dropout if i + 1 != num_layers else 0.0, highway_bias, layer_norm=layer_norm))

    def forward(self, x, c0, memory, attn_mask):
        """x [L, B, d]; c0 [n_layer, B, d]; memory: list of [M, B, d] or None.
        Returns h [L, B, d], c_last [n_layer, B, d], saved inputs (one per layer)."""
        inputs, lasts = [], []
        for i, cell in enumerate(self.rnn_lst):
            inputs.append(x)
            x, c = cell(x, c0[i], memory[i] if memory is not None else None, attn_mask)
            lasts.append(c)
        return x, torch.stack(lasts), inputs


class Model(nn.Module):
    """The enwik8 LM: emb = drop(E[x]); h = SRUpp(emb); logits = output_layer(drop(h))
    (untied, with bias). x [L, B] time-major."""

    def __init__(self, n_token, d_model, d_attn, n_layer, attn_every=1, dropout=0.0,
                 attn_dropout=0.0, mem_len=0, highway_bias=-2.0):
        super().__init__()
        self.n_d, self.depth, self.mem_len = d_model, n_layer, mem_len
        self.drop = nn.Dropout(dropout)
        self.embedding_layer = nn.Embedding(n_token, d_model)
        self.rnn = SRUpp(d_model, d_model, d_attn, n_layer, dropout, attn_dropout, highway_bias,
                         attn_every)
        self.output_layer = nn.Linear(d_model, n_token)
        self.init_weights()

    def init_weights(self):
        for p in list(self.embedding_layer.parameters()) + list(self.output_layer.parameters()):
            if p.dim() > 1:
                val = (3.0 / p.size(0)) ** 0.5  # the official "old init" (layer_norm off)
                p.data.uniform_(-val, val)
            else:
                p.data.zero_()

    def forward(self, x, hidden=None, memory=None):
        """x [L, B]; hidden [n_layer, B, d] or None; memory list or None.
        Returns logits [L, B, V], top hidden [L, B, d], new hidden, new memory."""
        L, B = x.shape
        M = 0 if memory is None or memory[0] is None else memory[0].size(0)
        # The official set_mask: triu(ones, 1) * -10000 sliced at the memory length.
        ones = torch.ones(M + L, M + L, dtype=self.output_layer.weight.dtype)
        attn_mask = (torch.triu(ones, diagonal=1) * -10000.0)[M:M + L, :M + L]
        if hidden is None:
            hidden = torch.zeros(self.depth, B, self.n_d, dtype=self.output_layer.weight.dtype)
        mem = None if M == 0 else memory
        emb = self.drop(self.embedding_layer(x))
        h, new_hidden, inputs = self.rnn(emb, hidden, mem, attn_mask)
        logits = self.output_layer(self.drop(h))
        new_mem = None
        if self.mem_len > 0:
            new_mem = []
            for i, inp in enumerate(inputs):
                full = inp.detach() if mem is None else torch.cat([mem[i], inp.detach()], 0)
                new_mem.append(full[-self.mem_len:])
        return logits, h, new_hidden.detach(), new_mem
