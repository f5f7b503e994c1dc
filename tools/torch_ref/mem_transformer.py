# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch reference of docs/math.md#relative-attention-and-rel-shift: Transformer-XL (and RSA-XL, docs/math.md#rsa-attention-and-the-gate and #relative-attention-and-rel-shift).

A compact re-implementation of MemTransformerLM from the official
kimiyoung/transformer-xl ``pytorch/mem_transformer.py`` restricted to what
Remora hosts: attn_type 0 (RelPartialLearnableMultiHeadAttn), div_val 1 (one
embedding table, no cutoffs, no projections), tie_weight, ext_len 0, no sampled
softmax. Layout is time-major like the official code: ids [L, B], hidden
[L, B, d], scores [Lq, Lk, B, H].

State-dict names are the official ones (what Remora loads)::

    word_emb.emb_layers.0.weight                 [n_token, d_model]  (tied output weight)
    r_w_bias, r_r_bias                           [n_head, d_head]    (shared by all layers)
    layers.N.dec_attn.qkv_net.weight             [3 H D, d_model]    (no bias)
    layers.N.dec_attn.r_net.weight               [H D, d_model]      (no bias)
    layers.N.dec_attn.o_net.weight               [d_model, H D]      (no bias)
    layers.N.dec_attn.layer_norm.weight / .bias  [d_model]
    layers.N.pos_ff.CoreNet.0.weight / .bias     [d_inner, d_model], [d_inner]
    layers.N.pos_ff.CoreNet.3.weight / .bias     [d_model, d_inner], [d_model]
    layers.N.pos_ff.layer_norm.weight / .bias    [d_model]
    crit.out_layers.0.bias                       [n_token]
  RSA-XL adds, per layer (docs/math.md#recurrence-encoding-matrices-rem):
    layers.N.dec_attn.rem.eta    [regular + dilated_regular]
    layers.N.dec_attn.rem.nu     [cyclic + dilated_cyclic]
    layers.N.dec_attn.rem.theta  [cyclic + dilated_cyclic]
    layers.N.dec_attn.rem.mu     [Hr] (gate "head") or [1] (gate "layer")

Forward of one segment (docs/math.md#relative-attention-and-rel-shift; M = current memory length, may be 0):

    h0  = E[ids] * sqrt(d_model)                          (dropout)
    pos = [Lk-1, ..., 0], clamped to clamp_len when > 0
    R   = [sin(pos x inv_freq), cos(pos x inv_freq)],  inv_freq = 1/10000^(arange(0,d,2)/d)
    per layer l (input x = h_l, memory m_l):
      c = [m_l; x]  (pre_lnorm: c = LN_attn([m_l; x]), the memory rows normalised too)
      q, k, v = chunk(c W_qkv^T, 3); q = q[-Lq:];  r = R W_r^T
      AC = (q + r_w_bias) . k,   BD = rel_shift((q + r_r_bias) . r)
      S  = (AC + BD) / sqrt(D),  -inf where j > M + i  (same_length: also j <= M + i - mem_len)
      A  = dropatt(softmax_j S);  O_h = A_h V_h
        RSA: O_h = (1 - sigmoid(mu_h)) A_h V_h + sigmoid(mu_h) P_h V_h  for h < Hr
      a  = dropout(O W_o^T)
      post-LN: y = LN_attn(x + a);  z = LN_ff(y + FF(y))
      pre-LN:  y = x + a;           z = y + FF(LN_ff(y))
      FF = Dropout(Linear2(Dropout(ReLU(Linear1(.)))))
    logits = dropout(h_L) E^T + b;  loss = mean_t -log softmax(logits)[target]
    new_mems[l] = last mem_len rows of [m_l; h_l]  (detached), l = 0..n_layer-1

Differences from the official code, none of which changes a number in float32
and all of which keep float64 exact:
- the official masked_fill does ``attn_score.float().masked_fill(...).type_as(s)``,
  which would round float64 scores through float32; here the mask is applied in
  the score's own dtype (so float64 goldens are float64 all the way).
- the official model keeps n_layer + 1 memories (the last one, the output of the
  top layer, is never read); ``forward`` here returns only the n_layer that are
  read, and the top hidden state separately.
- the official ``_update_mems(hids, mems, mlen, qlen)`` call swaps the qlen/mlen
  arguments of its definition; with ext_len = 0 the result is the same
  (end = mlen + qlen, begin = max(0, end - mem_len)), which is what is done here.
- inv_freq is computed in float64 and is not a state-dict entry (the official
  computes it in the default dtype, float32, and saves it as pos_emb.inv_freq; a
  float64 official model therefore carries float32-rounded frequencies). An
  official checkpoint also has crit.out_layers.0.weight (the tied embedding);
  load one with strict=False after dropping those two names.
- RSA: P_h is the masked REM (torch_ref.rem.rem_matrix) over the Lk = M + Lq keys
  at distance n = M + i - j; it is NOT restricted by same_length nor by clamp_len
  (those shape the softmax attention only), and the gate takes A after dropatt.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

try:  # as a package (tools/ on sys.path) or run next to rem.py
    from torch_ref import rem as _rem
except ImportError:  # pragma: no cover
    import rem as _rem


class PositionalEmbedding(nn.Module):
    """R[p] = [sin(pos_p * inv_freq), cos(pos_p * inv_freq)] (all sines, then all cosines)."""

    def __init__(self, demb):
        super().__init__()
        self.demb = demb
        inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0, dtype=torch.float64) / demb))
        self.register_buffer("inv_freq", inv_freq, persistent=False)   # not in the state dict

    def forward(self, pos_seq):                       # pos_seq [Lk] -> [Lk, 1, d]
        sinusoid = torch.outer(pos_seq, self.inv_freq.to(pos_seq.dtype))
        return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None, :]


class PositionwiseFF(nn.Module):
    def __init__(self, d_model, d_inner, dropout, pre_lnorm=False):
        super().__init__()
        self.CoreNet = nn.Sequential(
            nn.Linear(d_model, d_inner), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(d_inner, d_model), nn.Dropout(dropout))
        self.layer_norm = nn.LayerNorm(d_model)         # eps 1e-5
        self.pre_lnorm = pre_lnorm

    def forward(self, inp):
        if self.pre_lnorm:
            return inp + self.CoreNet(self.layer_norm(inp))
        return self.layer_norm(inp + self.CoreNet(inp))


class RemParams(nn.Module):
    """The REM parameters of one attention layer (docs/math.md#initialisation-and-checkpoint-names names and shapes)."""

    def __init__(self, spec, gate="head"):
        super().__init__()
        self.spec = _rem.normalize_spec(spec)
        self.n_heads = _rem.num_heads(self.spec)
        s = self.spec
        n_reg = s["regular"] + s["dilated_regular"]
        n_cyc = s["cyclic"] + s["dilated_cyclic"]
        self.eta = nn.Parameter(torch.empty(n_reg))
        self.nu = nn.Parameter(torch.empty(n_cyc))
        self.theta = nn.Parameter(torch.empty(n_cyc))
        self.mu = nn.Parameter(torch.empty(self.n_heads if gate == "head" else 1))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """docs/math.md#recurrence-encoding-matrices-rem: eta ~ U([-2,-1] u [1,2]), nu ~ U(1,2), theta = pi/4, mu ~ U(-3,3)."""
        mag = torch.rand_like(self.eta) + 1
        sign = torch.where(torch.rand_like(self.eta) < 0.5, -1.0, 1.0).to(self.eta.dtype)
        self.eta.copy_(mag * sign)
        self.nu.uniform_(1, 2)
        self.theta.fill_(math.pi / 4)
        self.mu.uniform_(-3, 3)

    def matrix(self, Lq, Lk):                          # [Hr, Lq, Lk]
        return _rem.rem_matrix(self.spec, self.eta, self.nu, self.theta, Lq, Lk)


def rel_shift(x):
    """The official zero-pad trick on x [Lq, Lk, ...]: returns y with
    y[i, j] = x[i, Lq - 1 - i + j] wherever j <= i + (Lk - Lq) (the rest is
    another row's data or a pad zero, always masked out by the causal mask)."""
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return x_padded[1:].view_as(x)


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, n_head, d_model, d_head, dropout, dropatt=0.0, pre_lnorm=False,
                 attention="softmax", rem_spec=None, gate="head"):
        super().__init__()
        self.n_head, self.d_model, self.d_head = n_head, d_model, d_head
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.drop = nn.Dropout(dropout)
        self.dropatt = nn.Dropout(dropatt)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.scale = 1 / (d_head ** 0.5)
        self.pre_lnorm = pre_lnorm
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
        if attention not in ("softmax", "rsa"):
            raise ValueError(f"attention must be 'softmax' or 'rsa', got {attention!r}")
        self.attention = attention
        if attention == "rsa":
            self.rem = RemParams(rem_spec, gate)
            if self.rem.n_heads > n_head:
                raise ValueError(f"REM spec has {self.rem.n_heads} heads, attention has {n_head}")

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems=None):
        """w [Lq, B, d], r [Lk, 1, d], attn_mask bool [Lq, Lk] (True = hidden), mems [M, B, d]."""
        qlen, bsz = w.size(0), w.size(1)
        cat = w if mems is None or mems.numel() == 0 else torch.cat([mems, w], 0)
        w_heads = self.qkv_net(self.layer_norm(cat) if self.pre_lnorm else cat)
        r_head_k = self.r_net(r)
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        w_head_q = w_head_q[-qlen:]
        klen, rlen = w_head_k.size(0), r.size(0)
        H, D = self.n_head, self.d_head
        w_head_q = w_head_q.view(qlen, bsz, H, D)
        w_head_k = w_head_k.view(klen, bsz, H, D)
        w_head_v = w_head_v.view(klen, bsz, H, D)
        r_head_k = r_head_k.view(rlen, H, D)

        AC = torch.einsum("ibnd,jbnd->ijbn", w_head_q + r_w_bias, w_head_k)
        BD = rel_shift(torch.einsum("ibnd,jnd->ijbn", w_head_q + r_r_bias, r_head_k))
        attn_score = (AC + BD) * self.scale                    # [Lq, Lk, B, H]
        attn_score = attn_score.masked_fill(attn_mask[:, :, None, None], float("-inf"))
        attn_prob = self.dropatt(F.softmax(attn_score, dim=1))
        attn_vec = torch.einsum("ijbn,jbnd->ibnd", attn_prob, w_head_v)   # [Lq, B, H, D]

        if self.attention == "rsa":
            Hr = self.rem.n_heads
            P = self.rem.matrix(qlen, klen)                    # [Hr, Lq, Lk]
            PV = torch.einsum("nij,jbnd->ibnd", P, w_head_v[:, :, :Hr])
            mu = self.rem.mu.view(1, 1, -1, 1)                 # [Hr] or [1]
            mixed = _rem.gate(attn_vec[:, :, :Hr], PV, mu)
            attn_vec = torch.cat([mixed, attn_vec[:, :, Hr:]], dim=2)

        attn_vec = attn_vec.contiguous().view(qlen, bsz, H * D)
        attn_out = self.drop(self.o_net(attn_vec))
        if self.pre_lnorm:
            return w + attn_out
        return self.layer_norm(w + attn_out)


class RelPartialLearnableDecoderLayer(nn.Module):
    def __init__(self, n_head, d_model, d_head, d_inner, dropout, dropatt=0.0, pre_lnorm=False,
                 **attn_kw):
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, d_head, dropout,
                                                         dropatt, pre_lnorm, **attn_kw)
        self.pos_ff = PositionwiseFF(d_model, d_inner, dropout, pre_lnorm)

    def forward(self, dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask, mems=None):
        out = self.dec_attn(dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask, mems)
        return self.pos_ff(out)


class AdaptiveEmbedding(nn.Module):
    """div_val 1, no cutoffs, d_proj == d_embed: one table, scaled by sqrt(d)."""

    def __init__(self, n_token, d_embed):
        super().__init__()
        self.emb_layers = nn.ModuleList([nn.Embedding(n_token, d_embed)])
        self.emb_scale = d_embed ** 0.5

    def forward(self, inp):
        return self.emb_layers[0](inp) * self.emb_scale


class _Crit(nn.Module):
    """ProjectedAdaptiveLogSoftmax with no clusters: holds only out_layers.0.bias
    (its weight is the tied embedding)."""

    def __init__(self, n_token):
        super().__init__()
        self.out_layers = nn.ModuleList([_BiasOnly(n_token)])


class _BiasOnly(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n))


def make_dec_attn_mask(qlen, mlen, mem_len, same_length, device=None):
    """bool [Lq, Lk], True = masked. Official: triu(ones(Lq, Lk), 1 + mlen), and with
    same_length also tril(ones, -mask_shift_len), mask_len = Lk - mem_len,
    mask_shift_len = Lq - mask_len if mask_len > 0 else Lq; i.e. key j is hidden from
    query i when j > M + i, or (same_length) j <= M + i - mem_len."""
    klen = mlen + qlen
    ones = torch.ones(qlen, klen, device=device)
    mask = torch.triu(ones, diagonal=1 + mlen)
    if same_length:
        mask_len = klen - mem_len
        mask_shift_len = qlen - mask_len if mask_len > 0 else qlen
        mask = mask + torch.tril(ones, -mask_shift_len)
    return mask > 0


class MemTransformerLM(nn.Module):
    def __init__(self, n_token, n_layer, n_head, d_model, d_head, d_inner, dropout=0.0,
                 dropatt=0.0, tgt_len=None, mem_len=0, clamp_len=-1, same_length=False,
                 pre_lnorm=False, attention="softmax", rem_spec=None, gate="head",
                 init_std=0.02):
        super().__init__()
        self.n_token, self.n_layer, self.n_head = n_token, n_layer, n_head
        self.d_model, self.d_head = d_model, d_head
        self.tgt_len, self.mem_len = tgt_len, mem_len
        self.clamp_len, self.same_length = clamp_len, same_length
        self.word_emb = AdaptiveEmbedding(n_token, d_model)
        self.drop = nn.Dropout(dropout)
        attn_kw = {"attention": attention}
        if attention == "rsa":
            attn_kw.update(rem_spec=rem_spec, gate=gate)
        self.layers = nn.ModuleList([
            RelPartialLearnableDecoderLayer(n_head, d_model, d_head, d_inner, dropout,
                                            dropatt, pre_lnorm, **attn_kw)
            for _ in range(n_layer)])
        self.pos_emb = PositionalEmbedding(d_model)
        self.r_w_bias = nn.Parameter(torch.empty(n_head, d_head))
        self.r_r_bias = nn.Parameter(torch.empty(n_head, d_head))
        self.crit = _Crit(n_token)
        self.reset_parameters(init_std)

    @torch.no_grad()
    def reset_parameters(self, init_std=0.02, bias_std=0.0):
        """docs/math.md#relative-attention-and-rel-shift (the official train.py weights_init with init 'normal'): weights
        N(0, init_std), biases 0, LayerNorm weight N(1, init_std), r_w_bias/r_r_bias
        N(0, init_std); REM parameters as docs/math.md#initialisation-and-checkpoint-names. bias_std > 0 draws biases (and
        LayerNorm biases) from N(0, bias_std) instead (goldens: every tensor matters)."""
        for name, p in self.named_parameters():
            if ".rem." in name:
                continue
            if "layer_norm.weight" in name:
                p.normal_(1.0, init_std)
            elif name.endswith("bias") and name not in ("r_w_bias", "r_r_bias"):
                p.normal_(0.0, bias_std) if bias_std > 0 else p.zero_()
            else:
                p.normal_(0.0, init_std)
        for layer in self.layers:
            if hasattr(layer.dec_attn, "rem"):
                layer.dec_attn.rem.reset_parameters()

    def init_mems(self):
        """n_layer empty memories (the official code keeps one more, never read)."""
        p = self.r_w_bias
        return [torch.empty(0, dtype=p.dtype, device=p.device) for _ in range(self.n_layer)]

    def _update_mems(self, hids, mems, mlen, qlen):
        with torch.no_grad():
            end_idx = mlen + qlen
            beg_idx = max(0, end_idx - self.mem_len)
            return [torch.cat([m, h], 0)[beg_idx:end_idx].detach() if m.numel() else
                    h[beg_idx:end_idx].detach() for m, h in zip(mems, hids)]

    def _forward(self, dec_inp, mems):
        qlen, bsz = dec_inp.size()
        word_emb = self.word_emb(dec_inp)
        mlen = mems[0].size(0) if mems and mems[0].numel() else 0
        klen = mlen + qlen
        dec_attn_mask = make_dec_attn_mask(qlen, mlen, self.mem_len, self.same_length,
                                           word_emb.device)
        pos_seq = torch.arange(klen - 1, -1, -1.0, device=word_emb.device, dtype=word_emb.dtype)
        if self.clamp_len > 0:
            pos_seq = pos_seq.clamp(max=self.clamp_len)
        pos_emb = self.drop(self.pos_emb(pos_seq))
        core_out = self.drop(word_emb)
        hids = [core_out]
        for i, layer in enumerate(self.layers):
            core_out = layer(core_out, pos_emb, self.r_w_bias, self.r_r_bias, dec_attn_mask,
                             mems[i] if mems else None)
            hids.append(core_out)
        core_out = self.drop(core_out)
        new_mems = self._update_mems(hids[:-1], mems, mlen, qlen) if self.mem_len > 0 else mems
        return core_out, new_mems

    def forward(self, data, target, mems=None):
        """data, target [L, B] (time-major). Returns (logits [L, B, n_token], loss (mean
        NLL, 0-d), new_mems (list of n_layer [M', B, d], detached), hidden [L, B, d])."""
        if not mems:
            mems = self.init_mems()
        hidden, new_mems = self._forward(data, mems)
        pred_hid = hidden[-target.size(0):]
        logits = F.linear(pred_hid, self.word_emb.emb_layers[0].weight,
                          self.crit.out_layers[0].bias)
        nll = -F.log_softmax(logits, dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        return logits, nll.mean(), new_mems, hidden
