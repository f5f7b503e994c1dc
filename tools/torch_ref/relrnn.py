# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch 1.13 reference for Remora's recurrent models (docs/math.md#relevancy-screening-relrnn-and-rellstm): RelRNN and
RelLSTM with relevancy screening, written per example with Python lists (the
official bhargav104/MemoryNets keeps its memory the same way), and the
RecurrentLM wrapper (encoder -> core -> decoder) for rnn | lstm | relrnn | rellstm,
where rnn / lstm are torch.nn.RNN / torch.nn.LSTM themselves (batch_first).

Semantics (the same as models/relrnn.h, which lists where the official code differs):
  at step t, S = the last nu states [h_{t-nu} .. h_{t-1}], R = up to rho older ones;
  e_i = v . tanh(Va s_{t-1} + Ua h_i); alpha = softmax(e); c_t = sum alpha_i h_i;
  s_t = (h_{t-1} + c_t) / 2; s_0 = h_{-1} (the carried state; zeros at the start).
  RelRNN: h_t = tanh(U x_t + V s_t + b); RelLSTM: an LSTM step with recurrent input s_t.
  C(i) = sum of the detached alpha received while in S. After h_t, h_{t-nu} leaves S:
  the first empty R slot takes it; with R full it replaces the first R slot with
  the smallest C when its C is strictly larger, else it is dropped.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class _Screened(nn.Module):
    """Common memory logic; subclasses give step(x_t, s, state) -> (h, state)."""

    def __init__(self, hidden_size, short_term, relevant):
        super().__init__()
        self.hidden_size, self.nu, self.rho = hidden_size, short_term, relevant

    def _reset_uniform(self):
        """Draws every parameter from U(-1/sqrt(H), 1/sqrt(H)) (torch.nn.RNN's rule), in order."""
        k = 1 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -k, k)

    def _run(self, x, init, trace=None):
        """x [B, L, I]; init: per-row initial state tuple builder. Returns [B, L, H], last states."""
        B, L, _ = x.shape
        K = self.nu + self.rho
        rows, finals = [], []
        times = torch.full((L, B, K), -1, dtype=torch.int64)
        rel = torch.zeros(L, B, K, dtype=torch.float64)
        stats = dict(admissions=0, replacements=0, rejections=0, min_margin=math.inf)
        for b in range(B):
            state = init(b)
            h = state[0]
            s = h  # s_0 = h_{-1}
            S, R = [], [None] * self.rho  # entries: dict(h=, t=, C=)
            hs = []
            for t in range(L):
                if t > 0:
                    mem = S + [m for m in R if m is not None]
                    keys = torch.stack([m["h"] for m in mem])  # [n, H]
                    e = torch.tanh(self.Va(s).unsqueeze(0) + self.Ua(keys)) @ self.v.reshape(-1)  # [n]
                    alpha = torch.softmax(e, 0)
                    c = alpha @ keys
                    if trace is not None and trace.get("record_alpha"):
                        # (row, t, time index of each attended state, its alpha)
                        trace.setdefault("reads", []).append(
                            (b, t, [m["t"] for m in mem], alpha.detach().tolist()))
                    for i, m in enumerate(S):
                        m["C"] += alpha[i].item()
                    s = 0.5 * (h + c)
                h, state = self.step(x[b, t], s, state)
                if len(S) == self.nu:
                    leave = S.pop(0)
                    if self.rho > 0:
                        empty = [r for r in range(self.rho) if R[r] is None]
                        if empty:
                            R[empty[0]] = leave
                            stats["admissions"] += 1
                        else:
                            cs = [m["C"] for m in R]
                            k = min(range(self.rho), key=lambda r: (cs[r], r))
                            margin = abs(leave["C"] - cs[k])
                            if leave["C"] > cs[k]:
                                R[k] = leave
                                stats["replacements"] += 1
                                margin = min([margin] + [cs[r] - cs[k] for r in range(self.rho) if r != k])
                            else:
                                stats["rejections"] += 1
                            stats["min_margin"] = min(stats["min_margin"], margin)
                S.append(dict(h=h, t=t, C=0.0))
                pad = self.nu - len(S)
                for j, m in enumerate(S):
                    times[t, b, pad + j] = m["t"]
                    rel[t, b, pad + j] = m["C"]
                for r, m in enumerate(R):
                    if m is not None:
                        times[t, b, self.nu + r] = m["t"]
                        rel[t, b, self.nu + r] = m["C"]
                hs.append(h)
            rows.append(torch.stack(hs))
            finals.append(state)
        if trace is not None:
            trace.update(slot_time=times, relevance=rel, **stats)
        return torch.stack(rows), finals


class RelRNNCell(_Screened):
    """Parameters: v [1, H], U.weight [H, I], U.bias [H], V.weight, Ua.weight, Va.weight [H, H]."""

    def __init__(self, input_size, hidden_size, short_term, relevant):
        super().__init__(hidden_size, short_term, relevant)
        H = hidden_size
        self.v = nn.Parameter(torch.empty(1, H))
        self.U = nn.Linear(input_size, H)
        self.V = nn.Linear(H, H, bias=False)
        self.Ua = nn.Linear(H, H, bias=False)
        self.Va = nn.Linear(H, H, bias=False)
        self._reset_uniform()

    def step(self, x_t, s, state):
        h = torch.tanh(self.U(x_t) + self.V(s))
        return h, (h,)

    def forward(self, x, h0=None, trace=None):
        B, H = x.shape[0], self.hidden_size
        h0 = x.new_zeros(B, H) if h0 is None else h0
        out, finals = self._run(x, lambda b: (h0[b],), trace)
        return out, torch.stack([f[0] for f in finals])


class RelLSTMCell(_Screened):
    """Parameters: weight_ih [4H, I], weight_hh [4H, H], bias_ih, bias_hh [4H] (gates i, f, g, o),
    v [1, H], Ua.weight, Va.weight [H, H]."""

    def __init__(self, input_size, hidden_size, short_term, relevant):
        super().__init__(hidden_size, short_term, relevant)
        H = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * H, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * H, H))
        self.bias_ih = nn.Parameter(torch.empty(4 * H))
        self.bias_hh = nn.Parameter(torch.empty(4 * H))
        self.v = nn.Parameter(torch.empty(1, H))
        self.Ua = nn.Linear(H, H, bias=False)
        self.Va = nn.Linear(H, H, bias=False)
        self._reset_uniform()

    def step(self, x_t, s, state):
        _, c = state
        gates = x_t @ self.weight_ih.t() + self.bias_ih + s @ self.weight_hh.t() + self.bias_hh
        i, f, g, o = gates.chunk(4, 0)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, (h, c)

    def forward(self, x, h0=None, c0=None, trace=None):
        B, H = x.shape[0], self.hidden_size
        h0 = x.new_zeros(B, H) if h0 is None else h0
        c0 = x.new_zeros(B, H) if c0 is None else c0
        out, finals = self._run(x, lambda b: (h0[b], c0[b]), trace)
        return out, torch.stack([f[0] for f in finals]), torch.stack([f[1] for f in finals])


class RecurrentLM(nn.Module):
    """encoder (Embedding) -> rnn -> decoder (Linear), the names of models::RecurrentLM.
    state: a list of [B, H] tensors as SequenceState::cells (rnn: h per layer; lstm:
    h_0, c_0, h_1, c_1, ...; relrnn: h; rellstm: h, c)."""

    def __init__(self, type, n_token, d_model, n_layer=1, short_term=10, relevant=10, n_out=0):
        super().__init__()
        self.type, self.n_layer = type, n_layer
        H = d_model
        self.encoder = nn.Embedding(n_token, H)
        if type == "rnn":
            self.rnn = nn.RNN(H, H, n_layer, batch_first=True)
        elif type == "lstm":
            self.rnn = nn.LSTM(H, H, n_layer, batch_first=True)
        elif type == "relrnn":
            self.rnn = RelRNNCell(H, H, short_term, relevant)
        else:
            self.rnn = RelLSTMCell(H, H, short_term, relevant)
        self.decoder = nn.Linear(H, n_out if n_out > 0 else n_token)

    def forward(self, ids, state=None, trace=None):
        x = self.encoder(ids)
        n = self.n_layer
        if self.type == "rnn":
            out, hn = self.rnn(x, None if not state else torch.stack(state))
            new = [hn[l] for l in range(n)]
        elif self.type == "lstm":
            hc = None if not state else (torch.stack(state[0::2]), torch.stack(state[1::2]))
            out, (hn, cn) = self.rnn(x, hc)
            new = [t for l in range(n) for t in (hn[l], cn[l])]
        elif self.type == "relrnn":
            out, hn = self.rnn(x, None if not state else state[0], trace=trace)
            new = [hn]
        else:
            out, hn, cn = self.rnn(x, *(state if state else (None, None)), trace=trace)
            new = [hn, cn]
        return self.decoder(out), out, [t.detach() for t in new]


def loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
