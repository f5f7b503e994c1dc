# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch reference of docs/math.md#recurrence-encoding-matrices-rem and #rsa-attention-and-the-gate: Recurrence Encoding Matrices and RSA attention.

Letters follow docs/math.md#notation-and-conventions: B batch, H heads, Hr REM heads, D head width,
M memory length, Lq query length, Lk = M + Lq key length. Query row i sits at
absolute position M + i, key column j at j; the distance is n = M + i - j.

A REM spec is a dict with the fields of Remora's ``RemSpec`` (ops/rem.h)::

    spec = {"regular": 2, "cyclic": 1, "dilated_regular": 0, "dilated_cyclic": 0,
            "dilations": [], "masked": True, "max_distance": 0}

Missing keys take these defaults. Parameters (the checkpoint names of docs/math.md#initialisation-and-checkpoint-names):

    eta   [regular + dilated_regular]   lambda = tanh(eta)
    nu    [cyclic + dilated_cyclic]     gamma  = sigmoid(nu)
    theta [cyclic + dilated_cyclic]
    mu    [Hr] (per head) or [1] (per layer): the gate, sigmoid(mu) weighs P

Head order: regular heads, then (cos, sin) for each cyclic pair, then the
dilated regular heads, then (cos, sin) for each dilated pair. ``dilations``
has one factor per dilated head or pair, in that order.

Everything here is differentiable with ordinary autograd and works in float32
and float64. It builds the dense Lq x Lk matrix P on purpose: this is the
reference, not the fast path (Remora's rem_apply is the O(L) scan of docs/math.md#the-scan-form-applying-a-rem-in-ol).

Usage::

    from torch_ref.rem import rem_matrix, rsa_attention, causal_mask
    P = rem_matrix(spec, eta, nu, theta, Lq, Lk)               # [Hr, Lq, Lk]
    out = rsa_attention(q, k, v, spec, eta, nu, theta, mu,
                        attn_mask=causal_mask(Lq, Lk))         # [B, H, Lq, D]
"""
import math

import torch

DEFAULT_SPEC = {
    "regular": 0,
    "cyclic": 0,
    "dilated_regular": 0,
    "dilated_cyclic": 0,
    "dilations": [],
    "masked": True,
    "max_distance": 0,
}


def normalize_spec(spec):
    """Returns a full spec dict (defaults filled in) after checking it."""
    s = dict(DEFAULT_SPEC)
    unknown = set(spec) - set(DEFAULT_SPEC)
    if unknown:
        raise ValueError(f"REM spec: unknown keys {sorted(unknown)}; known: {sorted(DEFAULT_SPEC)}")
    s.update(spec)
    s["dilations"] = list(s["dilations"])
    for key in ("regular", "cyclic", "dilated_regular", "dilated_cyclic"):
        if s[key] < 0:
            raise ValueError(f"REM spec: {key} must be >= 0, got {s[key]}")
    want = s["dilated_regular"] + s["dilated_cyclic"]
    if len(s["dilations"]) != want:
        raise ValueError(f"REM spec: dilations needs {want} entries (one per dilated head or "
                         f"pair), got {len(s['dilations'])}")
    if any(d < 2 for d in s["dilations"]):
        raise ValueError(f"REM spec: every dilation must be >= 2, got {s['dilations']}")
    if s["max_distance"] < 0:
        raise ValueError(f"REM spec: max_distance must be >= 0 (0 = no limit), got {s['max_distance']}")
    return s


def num_heads(spec):
    """Hr: the number of REM heads (each cyclic pair counts twice)."""
    s = normalize_spec(spec)
    return s["regular"] + 2 * s["cyclic"] + s["dilated_regular"] + 2 * s["dilated_cyclic"]


def rem_heads(spec):
    """The per-head table in the order of docs/math.md#kinds-of-rem-head-and-their-parameters: a list of (kind, dilation, param) where
    kind is "regular", "cos" or "sin" and param indexes eta (regular) or
    nu/theta (cos, sin)."""
    s = normalize_spec(spec)
    heads = []
    for i in range(s["regular"]):
        heads.append(("regular", 1, i))
    for i in range(s["cyclic"]):
        heads += [("cos", 1, i), ("sin", 1, i)]
    d = iter(s["dilations"])
    for i in range(s["dilated_regular"]):
        heads.append(("regular", next(d), s["regular"] + i))
    for i in range(s["dilated_cyclic"]):
        dil = next(d)
        heads += [("cos", dil, s["cyclic"] + i), ("sin", dil, s["cyclic"] + i)]
    return heads


def rem_matrix(spec, eta, nu, theta, Lq, Lk, key_padding=None):
    """The dense REM (docs/math.md#recurrence-encoding-matrices-rem): P [Hr, Lq, Lk], or [B, Hr, Lq, Lk] with
    key_padding [B, Lk] (nonzero/True = padded column, zeroed in P).

    P_h[i, j] = f_h(n) with n = (Lk - Lq) + i - j and
      regular: lambda^m,   cos: gamma^m cos(m theta),   sin: gamma^m sin(m theta)
    where m = n / dilation. Entries are 0 where n < 1 (masked) or n == 0
    (unmasked, which uses |n|), where n > max_distance (when > 0), and where
    the dilation does not divide n; f is never evaluated at those entries, so no
    lambda^0 and no fractional power of a negative lambda appears.
    """
    s = normalize_spec(spec)
    heads = rem_heads(s)
    if not heads:
        raise ValueError("rem_matrix: the spec has no REM heads")
    if not 0 <= Lq <= Lk:
        raise ValueError(f"rem_matrix: need 0 <= Lq <= Lk, got Lq={Lq}, Lk={Lk}")
    ref = eta if eta is not None and eta.numel() > 0 else nu
    dtype, device = ref.dtype, ref.device
    M = Lk - Lq
    i = torch.arange(Lq, device=device).unsqueeze(1)
    j = torch.arange(Lk, device=device).unsqueeze(0)
    n = M + i - j                                   # [Lq, Lk] int64
    if not s["masked"]:
        n = n.abs()
    valid = n >= 1
    if s["max_distance"] > 0:
        valid = valid & (n <= s["max_distance"])
    lam = torch.tanh(eta) if s["regular"] + s["dilated_regular"] > 0 else None
    gam = torch.sigmoid(nu) if s["cyclic"] + s["dilated_cyclic"] > 0 else None
    rows = []
    for kind, dil, p in heads:
        on = valid & (n % dil == 0)                 # the dilation grid
        m = torch.where(on, torch.div(n, dil, rounding_mode="floor"),
                        torch.zeros_like(n)).to(dtype)
        if kind == "regular":
            f = torch.pow(lam[p], m)                # integer-valued m: sign-correct for lambda < 0
        else:
            mag = torch.pow(gam[p], m)
            ang = m * theta[p]
            f = mag * (torch.cos(ang) if kind == "cos" else torch.sin(ang))
        rows.append(torch.where(on, f, torch.zeros((), dtype=dtype, device=device)))
    P = torch.stack(rows, 0)                        # [Hr, Lq, Lk]
    if key_padding is not None:
        keep = (key_padding == 0).to(dtype)         # [B, Lk]
        P = P.unsqueeze(0) * keep[:, None, None, :]
    return P


def gate(a, b, mu):
    """gate(a, b, mu) = (1 - sigmoid(mu)) * a + sigmoid(mu) * b (docs/math.md#rsa-attention-and-the-gate)."""
    g = torch.sigmoid(mu)
    return (1 - g) * a + g * b


def causal_mask(Lq, Lk, dtype=torch.float32, device=None):
    """Additive mask [Lq, Lk]: 0 where key j <= M + i, -inf above (M = Lk - Lq)."""
    M = Lk - Lq
    i = torch.arange(Lq, device=device).unsqueeze(1)
    j = torch.arange(Lk, device=device).unsqueeze(0)
    mask = torch.zeros(Lq, Lk, dtype=dtype, device=device)
    return mask.masked_fill(j > M + i, float("-inf"))


def rsa_attention(q, k, v, spec, eta, nu, theta, mu, attn_mask=None, key_padding=None,
                  scale=None):
    """RSA attention (docs/math.md#rsa-attention-and-the-gate). q [B, H, Lq, D], k, v [B, H, Lk, D] -> [B, H, Lq, D].

    Heads h < Hr: (1 - sigmoid(mu_h)) * softmax(q k^T * scale + mask) v + sigmoid(mu_h) * P_h v;
    heads h >= Hr: plain softmax attention. mu is [Hr] or [1] (shared by the layer).
    attn_mask: additive, broadcastable to [B, H, Lq, Lk] (e.g. causal_mask()).
    key_padding [B, Lk] (nonzero = padded): -inf in the scores and zero columns in P.
    scale defaults to 1/sqrt(D). No dropout here (the reference is deterministic).
    """
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    Hr = num_heads(spec)
    if Hr > H:
        raise ValueError(f"rsa_attention: the spec has {Hr} REM heads but attention has {H}")
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    S = torch.matmul(q, k.transpose(-2, -1)) * scale
    if attn_mask is not None:
        S = S + attn_mask
    if key_padding is not None:
        S = S.masked_fill(key_padding.bool()[:, None, None, :], float("-inf"))
    A = torch.softmax(S, dim=-1)
    O = torch.matmul(A, v)
    if Hr == 0:
        return O
    if mu.dim() != 1 or mu.shape[0] not in (1, Hr):
        raise ValueError(f"rsa_attention: mu must be [{Hr}] or [1], got {list(mu.shape)}")
    P = rem_matrix(spec, eta, nu, theta, Lq, Lk, key_padding)   # [Hr|B,Hr, Lq, Lk]
    Y = torch.matmul(P, v[:, :Hr])
    mixed = gate(O[:, :Hr], Y, mu.reshape(1, -1, 1, 1))
    if Hr == H:
        return mixed
    return torch.cat([mixed, O[:, Hr:]], dim=1)


# ---- safetensors (docs/math.md#checkpoints-the-safetensors-format), through the shared writer/reader ----

try:  # as a package (tools/ on sys.path) or run next to safetensors_io.py
    from torch_ref import safetensors_io as _st
except ImportError:  # pragma: no cover
    import safetensors_io as _st


def save_safetensors(path, tensors):
    """Writes {name: tensor} (F32/F64/I64) as safetensors."""
    _st.save(path, tensors)


def load_safetensors(path):
    """Reads F32/F64/I64 tensors from a safetensors file into {name: tensor}."""
    return _st.load(path)[0]

