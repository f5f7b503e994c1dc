# SPDX-License-Identifier: BSD-3-Clause
"""remora.torch: DLPack with PyTorch, gradcheck, and equality with a pure PyTorch
composition of the same mathematics (docs/math.md, ops/rem.h) in float64."""
import math

import pytest

torch = pytest.importorskip("torch")
import remora  # noqa: E402
import remora.torch as rt  # noqa: E402

F64 = dict(dtype=torch.float64, requires_grad=True)


def rem_matrix_torch(spec, eta, nu, theta, Lq, Lk, dilations=()):
    """P [Hr, Lq, Lk] of a masked REM (docs/math.md, Kinds of REM head): regular
    heads tanh(eta)^n, then (cos, sin) pairs sigmoid(nu)^n cos / sin(n theta), n
    = M + i - j >= 1, else 0."""
    M = Lk - Lq
    i = torch.arange(Lq, dtype=torch.float64)[:, None]
    j = torch.arange(Lk, dtype=torch.float64)[None, :]
    n = M + i - j
    valid = n >= 1
    safe = torch.where(valid, n, torch.ones_like(n))
    zero = torch.zeros_like(n)
    heads = []
    for h in range(spec.regular):
        heads.append(torch.where(valid, torch.tanh(eta[h]) ** safe, zero))
    for c in range(spec.cyclic):
        g = torch.sigmoid(nu[c])
        heads.append(torch.where(valid, g ** safe * torch.cos(safe * theta[c]), zero))
        heads.append(torch.where(valid, g ** safe * torch.sin(safe * theta[c]), zero))
    return torch.stack(heads)


def rsa_torch(q, k, v, spec, eta, nu, theta, mu, mask=None):
    """O_h = ((1 - sigmoid(mu_h)) A_h + sigmoid(mu_h) P_h) V_h for the REM heads,
    A_h V_h for the others, A = softmax(q k^T / sqrt(D) + mask) (docs/math.md, RSA attention)."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    A = torch.softmax(s, -1)
    P = rem_matrix_torch(spec, eta, nu, theta, q.shape[2], k.shape[2])
    hr = P.shape[0]
    g = torch.sigmoid(mu)[:, None, None]
    mixed = (1 - g) * A[:, :hr] + g * P
    return torch.cat([mixed, A[:, hr:]], 1) @ v


def test_dlpack_zero_copy_both_ways():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    r = remora.from_dlpack(t)
    assert r.data_ptr() == t.data_ptr() and r.shape == (3, 4)
    back = torch.utils.dlpack.from_dlpack(r)
    assert back.data_ptr() == t.data_ptr()
    r[0, 0] = 7
    assert t[0, 0].item() == 7
    x = remora.randn(2, 3, dtype=remora.float64)
    tx = torch.utils.dlpack.from_dlpack(x)
    assert tx.data_ptr() == x.data_ptr() and tx.dtype == torch.float64
    s = t[:, 1::2]
    assert remora.from_dlpack(s).stride() == s.stride()
    assert rt.to_remora(torch.ones(2, dtype=torch.int64)).dtype == remora.int64


def test_rem_apply_matches_torch_and_gradcheck():
    torch.manual_seed(0)
    spec = remora.RemSpec(regular=2, cyclic=1)
    eta = torch.tensor([1.3, -1.6], **F64)
    nu = torch.tensor([1.4], **F64)
    theta = torch.tensor([0.7], **F64)
    v = torch.randn(2, 4, 6, 3, **F64)
    out = rt.rem_apply(spec, eta, nu, theta, v, 4)
    ref = rem_matrix_torch(spec, eta, nu, theta, 4, 6) @ v
    assert torch.allclose(out, ref, rtol=0, atol=1e-10)
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, (eta, nu, theta, v), g)
    ref_grads = torch.autograd.grad(ref, (eta, nu, theta, v), g)
    for a, b in zip(grads, ref_grads):
        assert torch.allclose(a, b, rtol=0, atol=1e-10)
    assert torch.autograd.gradcheck(lambda e, n, t, x: rt.rem_apply(spec, e, n, t, x, 4), (eta, nu, theta, v))


@pytest.mark.parametrize("reference", [False, True])
def test_rsa_attention_matches_torch_and_gradcheck(reference):
    torch.manual_seed(1)
    spec = remora.RemSpec(regular=1, cyclic=1)
    B, H, Lq, Lk, D = 2, 4, 3, 5, 4
    q, k, v = torch.randn(B, H, Lq, D, **F64), torch.randn(B, H, Lk, D, **F64), torch.randn(B, H, Lk, D, **F64)
    eta, nu, theta = torch.tensor([1.2], **F64), torch.tensor([1.5], **F64), torch.tensor([0.6], **F64)
    mu = torch.randn(3, **F64)
    mask = torch.randn(Lq, Lk, **F64)
    out = rt.rsa_attention(q, k, v, spec, eta, nu, theta, mu, attn_mask=mask, reference=reference)
    ref = rsa_torch(q, k, v, spec, eta, nu, theta, mu, mask)
    assert torch.allclose(out, ref, rtol=0, atol=1e-10)
    ins = (q, k, v, eta, nu, theta, mu, mask)
    g = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, ins, g), torch.autograd.grad(ref, ins, g)):
        assert torch.allclose(a, b, rtol=0, atol=1e-10)

    def f(q, k, v, eta, nu, theta, mu, mask):
        return rt.rsa_attention(q, k, v, spec, eta, nu, theta, mu, attn_mask=mask, reference=reference)

    assert torch.autograd.gradcheck(f, ins)


def test_rsa_attention_causal_matches_mask():
    torch.manual_seed(2)
    spec = remora.RemSpec(regular=1)
    q = torch.randn(1, 2, 4, 3, **F64)
    eta, mu = torch.tensor([1.1], **F64), torch.tensor([0.3], **F64)
    causal = rt.rsa_attention(q, q, q, spec, eta, None, None, mu, causal=True)
    mask = torch.full((4, 4), float("-inf"), dtype=torch.float64).triu(1)
    ref = rsa_torch(q, q, q, spec, eta, None, None, mu, mask)
    assert torch.allclose(causal, ref, rtol=0, atol=1e-10)


def test_rsa_module_without_rem_is_torch_mha():
    torch.manual_seed(3)
    ours = rt.RSAAttention(8, 2, dtype=torch.float64)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(ours.in_proj_weight)
        mha.in_proj_bias.copy_(ours.in_proj_bias)
        mha.out_proj.weight.copy_(ours.out_proj.weight)
        mha.out_proj.bias.copy_(ours.out_proj.bias)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    a, _ = ours(x, x, x, attn_mask=mask)
    b, _ = mha(x, x, x, attn_mask=mask)
    assert torch.allclose(a, b, rtol=0, atol=1e-10)


def test_rsa_module_trains():
    torch.manual_seed(4)
    m = rt.RSAAttention(16, 4, remora.RemSpec(regular=1, cyclic=1), dtype=torch.float64)
    names = [n for n, _ in m.named_parameters()]
    assert {"eta", "nu", "theta", "mu", "in_proj_weight"} <= set(names)
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    y = torch.randn(2, 6, 16, dtype=torch.float64)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    first = None
    for _ in range(30):
        opt.zero_grad()
        loss = ((m(x, is_causal=True)[0] - y) ** 2).mean()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < first
    assert m.eta.grad is not None and m.mu.grad is not None


def test_to_torch_shares_memory():
    """torch.from_dlpack on a Remora tensor, whatever keywords this torch passes."""
    r = remora.randn(4, 256, 32)
    t = rt.to_torch(r)
    assert t.data_ptr() == r.data_ptr() and tuple(t.shape) == (4, 256, 32)
    assert rt.to_remora(t).data_ptr() == r.data_ptr()
