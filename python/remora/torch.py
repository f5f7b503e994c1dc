# SPDX-License-Identifier: BSD-3-Clause
"""remora.torch: Remora's REM and RSA ops inside PyTorch models.

rem_apply and rsa_attention take and return torch tensors and are
differentiable in PyTorch's autograd. Each call hands its inputs to Remora
without a copy (DLPack), runs Remora's forward with its inputs as leaves that
require grad, and keeps that Remora graph; PyTorch's backward runs Remora's
backward on it with the incoming gradient and hands the gradients back, again
through DLPack. RSAAttention is a torch.nn.Module with the parameters of
torch.nn.MultiheadAttention(batch_first=True) plus the REM parameters, a
drop-in attention layer.

The inputs' memory is shared, not copied: do not modify an input in place
between a forward and its backward. Double backward is not supported.
"""
import math

import torch
from torch.autograd.function import once_differentiable as _once_differentiable
from torch.utils import dlpack as _tdl

import remora as _rm

__all__ = ["to_remora", "to_torch", "rem_apply", "rsa_attention", "RSAAttention", "RemoraFunction"]


def to_remora(t):
    """A Remora tensor sharing t's memory (t detached; None stays None)."""
    if t is None:
        return None
    return _rm.from_dlpack(t.detach())


def to_torch(t):
    """A torch tensor sharing the Remora tensor's memory (detached; None stays None)."""
    if t is None:
        return None
    return _tdl.from_dlpack(t.detach())


class RemoraFunction(torch.autograd.Function):
    """fn(*remora_tensors) -> remora tensor, as a torch autograd Function.

    apply(fn, *tensors): the torch tensors (or None) become Remora leaves
    (requiring grad where PyTorch needs their gradient); backward runs
    Remora's backward on the kept graph (retained, so PyTorch may call it more
    than once, as gradcheck does).
    """

    @staticmethod
    def forward(ctx, fn, *tensors):
        needs = ctx.needs_input_grad[1:]
        leaves = []
        for t, need in zip(tensors, needs):
            if t is None:
                leaves.append(None)
                continue
            r = to_remora(t)
            if need and r.is_floating_point():
                r.requires_grad_(True)
            leaves.append(r)
        with _rm.enable_grad():
            out = fn(*leaves)
        ctx.remora = (out, leaves)
        return to_torch(out)

    @staticmethod
    @_once_differentiable
    def backward(ctx, grad):
        out, leaves = ctx.remora
        if not out.requires_grad:
            return (None,) * (1 + len(leaves))
        for leaf in leaves:
            if leaf is not None and leaf.requires_grad:
                leaf.grad = None
        out.backward(to_remora(grad.contiguous()), retain_graph=True)
        grads = [None if leaf is None or not leaf.requires_grad or leaf.grad is None else to_torch(leaf.grad)
                 for leaf in leaves]
        return (None, *grads)


def rem_apply(spec, eta, nu, theta, v, Lq, key_padding=None):
    """P V without building P (ops/rem.h): v [B, Hr, Lk, D] -> [B, Hr, Lq, D].

    spec is a remora.RemSpec; eta [num_eta], nu and theta [num_cyclic] (None
    where the spec has none of that kind). Differentiable in v, eta, nu, theta.
    """
    def fn(eta_, nu_, theta_, v_, kp_):
        return _rm.rem_apply(spec, eta_, nu_, theta_, v_, Lq, key_padding=kp_)

    return RemoraFunction.apply(fn, eta, nu, theta, v, key_padding)


def rsa_attention(q, k, v, spec=None, eta=None, nu=None, theta=None, mu=None, attn_mask=None,
                  key_padding=None, scale=0.0, causal=False, window=-1, dropout=0.0, train=False,
                  reference=False):
    """RSA attention (ops/rem.h, docs/math.md): q [B, H, Lq, D], k, v [B, H, Lk, D] -> [B, H, Lq, D].

    The first spec.num_heads() heads mix softmax attention with the REM
    through the gate sigmoid(mu); the others are plain softmax heads. scale 0
    means 1/sqrt(D); attn_mask is an additive score bias broadcasting to
    [B, H, Lq, Lk]; key_padding [B, Lk] nonzero = padded. Differentiable in
    q, k, v, eta, nu, theta, mu and attn_mask.
    """
    spec = spec if spec is not None else _rm.RemSpec()

    def fn(q_, k_, v_, eta_, nu_, theta_, mu_, mask_, kp_):
        return _rm.rsa_attention(q_, k_, v_, spec, eta_, nu_, theta_, mu_, attn_mask=mask_, key_padding=kp_,
                                 scale=scale, dropout=dropout, train=train, causal=causal, window=window,
                                 reference=reference)

    return RemoraFunction.apply(fn, q, k, v, eta, nu, theta, mu, attn_mask, key_padding)


class RSAAttention(torch.nn.Module):
    """Multi-head RSA attention as a torch module (batch_first), a drop-in for
    torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True):
    in_proj_weight [3d, d], in_proj_bias [3d], out_proj (Linear d -> d), and
    the REM parameters eta, nu, theta and the gate mu of the spec's heads
    (initialised as Remora's nn.RSAAttention: eta ~ U([-2,-1] U [1,2]),
    nu ~ U(1, 2), theta = pi/4, mu ~ U(-3, 3)).

    forward(query, key=None, value=None, attn_mask=None, key_padding_mask=None,
    need_weights=False, is_causal=False) returns (output, None) like torch's
    module; the projections run in PyTorch, the attention core in Remora.
    """

    def __init__(self, embed_dim, num_heads, spec=None, dropout=0.0, bias=True, gate="head", device=None,
                 dtype=None, batch_first=True):
        super().__init__()
        if not batch_first:
            raise ValueError("RSAAttention: only batch_first=True is supported")
        if embed_dim % num_heads:
            raise ValueError("RSAAttention: num_heads must divide embed_dim")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.spec = spec if spec is not None else _rm.RemSpec()
        if self.spec.num_heads() > num_heads:
            raise ValueError("RSAAttention: the spec has more REM heads than num_heads")
        self.dropout = dropout
        self.batch_first = True
        kw = {"device": device, "dtype": dtype}
        self.in_proj_weight = torch.nn.Parameter(torch.empty(3 * embed_dim, embed_dim, **kw))
        self.in_proj_bias = torch.nn.Parameter(torch.zeros(3 * embed_dim, **kw)) if bias else None
        self.out_proj = torch.nn.Linear(embed_dim, embed_dim, bias=bias, **kw)
        hr, ne, nc = self.spec.num_heads(), self.spec.num_eta(), self.spec.num_cyclic()

        def param(n):
            return torch.nn.Parameter(torch.empty(n, **kw)) if n > 0 else None

        self.eta, self.nu, self.theta = param(ne), param(nc), param(nc)
        self.mu = param((1 if gate == "layer" else hr) if hr > 0 else 0)
        self.reset_parameters()

    def reset_parameters(self):
        """torch.nn.MultiheadAttention's initialisation, and the REM's (docs/math.md)."""
        torch.nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            torch.nn.init.zeros_(self.in_proj_bias)
            torch.nn.init.zeros_(self.out_proj.bias)
        with torch.no_grad():
            if self.eta is not None:
                u = torch.rand_like(self.eta) * 2 - 1  # [-1, 1): |eta| in [1, 2]
                self.eta.copy_(torch.sign(u) * (1 + u.abs()))
            if self.nu is not None:
                self.nu.uniform_(1, 2)
                self.theta.fill_(math.pi / 4)
            if self.mu is not None:
                self.mu.uniform_(-3, 3)

    def forward(self, query, key=None, value=None, attn_mask=None, key_padding_mask=None, need_weights=False,
                is_causal=False):
        """query [B, Lq, d], key/value [B, Lk, d] (default: query) -> ([B, Lq, d], None).

        attn_mask [Lq, Lk]: a bool mask (True = blocked, as torch's) or an
        additive float bias; key_padding_mask [B, Lk]: True = padded;
        is_causal: query i sees keys j <= i + (Lk - Lq).
        """
        key = query if key is None else key
        value = key if value is None else value
        B, Lq, d = query.shape
        Lk = key.shape[1]
        H, D = self.num_heads, self.head_dim
        w = self.in_proj_weight
        b = self.in_proj_bias
        wq, wk, wv = w.chunk(3)
        bq, bk, bv = b.chunk(3) if b is not None else (None, None, None)

        def heads(x, w_, b_, L):
            return torch.nn.functional.linear(x, w_, b_).view(B, L, H, D).transpose(1, 2)

        q, k, v = heads(query, wq, bq, Lq), heads(key, wk, bk, Lk), heads(value, wv, bv, Lk)
        mask = None
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                mask = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device)
                mask = mask.masked_fill(attn_mask, float("-inf"))
            else:
                mask = attn_mask.to(query.dtype)
        kp = key_padding_mask.to(torch.int64) if key_padding_mask is not None else None
        o = rsa_attention(q, k, v, self.spec, self.eta, self.nu, self.theta, self.mu, attn_mask=mask,
                          key_padding=kp, causal=is_causal, dropout=self.dropout, train=self.training)
        o = o.transpose(1, 2).reshape(B, Lq, d)
        return self.out_proj(o), None
