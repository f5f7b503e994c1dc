# SPDX-License-Identifier: BSD-3-Clause
"""remora.Tensor, factories, operators, indexing, errors and the op table."""
import math

import pytest

import remora


def test_factories_and_metadata():
    x = remora.zeros(2, 3)
    assert x.shape == (2, 3) and x.dtype == remora.float32 and str(x.device) == "cpu"
    assert remora.ones((2, 3), dtype=remora.float64).dtype == remora.float64
    assert remora.arange(5).dtype == remora.int64 and remora.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert remora.arange(0, 1, 0.5).tolist() == [0.0, 0.5]
    assert remora.full((2,), 7).tolist() == [7.0, 7.0]
    assert remora.tensor([[1, 2], [3, 4]]).dtype == remora.int64
    assert remora.tensor([1.5, 2]).dtype == remora.float32
    assert remora.tensor([True, False]).dtype == remora.bool_
    assert remora.tensor(2.5).item() == 2.5 and remora.tensor(2.5).shape == ()
    with pytest.raises(remora.Error, match="ragged"):
        remora.tensor([[1, 2], [3]])
    for dt in (remora.float32, remora.float64, remora.bfloat16, remora.float16, remora.int64):
        assert remora.zeros(2, dtype=dt).dtype == dt


def test_randn_seeded():
    remora.manual_seed(3)
    a = remora.randn(4, 5)
    remora.manual_seed(3)
    b = remora.randn(4, 5)
    assert a.equal(b)
    g = remora.Generator(3)
    assert remora.randn(4, 5, generator=g).equal(a)


def test_operators():
    a = remora.tensor([1.0, 2.0, 3.0], dtype=remora.float64)
    b = remora.tensor([4.0, 5.0, 6.0], dtype=remora.float64)
    assert (a + b).tolist() == [5, 7, 9]
    assert (a - b).tolist() == [-3, -3, -3]
    assert (a * b).tolist() == [4, 10, 18]
    assert (b / a).tolist() == [4, 2.5, 2]
    assert (a @ b).item() == 32
    assert (-a).tolist() == [-1, -2, -3]
    assert (2 * a + 1).tolist() == [3, 5, 7]
    assert (1 - a).tolist() == [0, -1, -2]
    assert (6 / a).tolist() == [6, 3, 2]
    assert (a ** 2).tolist() == [1, 4, 9]
    assert (a < b).dtype == remora.bool_
    assert (a >= 2).tolist() == [False, True, True]
    assert (a == a).all() and (a != b).all()
    assert not (a == None)  # noqa: E711 - comparison with a non-tensor is False
    m = remora.randn(3, 4)
    assert (m @ remora.randn(4, 2)).shape == (3, 2)


def test_views_and_indexing():
    x = remora.arange(24).reshape(2, 3, 4)
    assert x.reshape(6, 4).shape == (6, 4) and x.reshape((4, 6)).shape == (4, 6)
    assert x.transpose(0, 2).shape == (4, 3, 2)
    assert x[1, 2, 3].item() == 23
    assert x[-1, :, 0].tolist() == [12, 16, 20]
    assert x[0, 1:3, ::2].tolist() == [[4, 6], [8, 10]]
    assert x[..., 0].shape == (2, 3)
    assert x[:, None].shape == (2, 1, 3, 4)
    assert x[remora.tensor([1, 0])].shape == (2, 3, 4)
    assert x[0][x[0] > 9].tolist() == [10, 11]
    assert x[0, [2, 0]].tolist() == [[8, 9, 10, 11], [0, 1, 2, 3]]
    y = remora.zeros(2, 3)
    y[0] = 1
    y[:, 2] = remora.tensor([5.0, 6.0])
    assert y.tolist() == [[1, 1, 5], [0, 0, 6]]
    assert [r.tolist() for r in remora.arange(4).reshape(2, 2)] == [[0, 1], [2, 3]]
    assert len(x) == 2


def test_autograd():
    x = remora.randn(3, 4, dtype=remora.float64, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    assert x.grad.allclose(2 * x.detach())
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    x.grad = None
    assert x.grad is None
    (x.softmax(1)[:, 0]).sum().backward()
    assert x.grad.shape == (3, 4)
    with remora.no_grad():
        z = x * 2
    assert not z.requires_grad
    assert remora.is_grad_enabled()

    @remora.no_grad()
    def f(t):
        return t * 3

    assert not f(x).requires_grad
    assert not x.detach().requires_grad


def test_item_tolist_repr():
    t = remora.tensor([[1.5, 2.0]])
    assert t.tolist() == [[1.5, 2.0]]
    assert isinstance(remora.tensor([3]).sum().item(), int)
    assert "CPUFloatType" in repr(t)
    assert float(remora.tensor(2.0)) == 2.0
    with pytest.raises(remora.Error):
        bool(t)


def test_to():
    t = remora.tensor([1.7, -2.2])
    assert t.to(remora.float64).dtype == remora.float64
    assert t.to(remora.int64).tolist() == [1, -2]
    assert t.to("cpu").device == "cpu"
    assert t.double().dtype == remora.float64


def test_error_class():
    assert issubclass(remora.Error, RuntimeError)
    with pytest.raises(remora.Error, match="matmul"):
        remora.zeros(2, 3) @ remora.zeros(2, 3)
    with pytest.raises(RuntimeError):
        remora.zeros(2) + remora.zeros(3)


def test_op_table_functions_and_methods():
    x = remora.randn(3, 4, dtype=remora.float64)
    assert x.sum().shape == () and x.sum(1).shape == (3,) and x.sum([0, 1], True).shape == (1, 1)
    assert remora.sum(x, dims=[1], keepdim=True).shape == (3, 1)
    assert x.mean(0).shape == (4,)
    assert abs(x.exp().log().sum().item() - x.sum().item()) < 1e-9
    assert remora.max(x).item() == max(x.tolist()[0] + x.tolist()[1] + x.tolist()[2])
    assert remora.max(x, 1).shape == (3,)
    v, i = x.topk(2)
    assert v.shape == (3, 2) and i.dtype == remora.int64
    assert len(x.chunk(2, 1)) == 2
    assert remora.cat([x, x], 0).shape == (6, 4)
    assert remora.layer_norm(x, None, None).shape == (3, 4)
    assert remora.linear(x, remora.randn(5, 4, dtype=remora.float64)).shape == (3, 5)
    t = remora.tensor([0, 2, 3], dtype=remora.int64)
    assert remora.cross_entropy(x, t, reduction="sum").shape == ()
    assert x.clamp(0.0).min().item() >= 0
    assert "Max over one dim" in remora.max.__doc__
    assert math.isclose(remora.sigmoid(remora.tensor(0.0)).item(), 0.5)


def test_every_table_row_is_bound_or_skipped():
    names = {row[1] for row in remora._C.op_table}
    for name in names:
        assert hasattr(remora, name) or name in remora.skipped_ops, name
    for kind, name, *_ in remora._C.op_table:
        if kind == "method" and name not in remora.skipped_ops:
            assert hasattr(remora.Tensor, name), name
    assert set(remora.skipped_ops) >= {"adam_step_", "index", "index_put"}


def test_rem_ops():
    spec = remora.RemSpec(regular=1, cyclic=1)
    eta = remora.tensor([1.2], dtype=remora.float64)
    nu = remora.tensor([1.5], dtype=remora.float64)
    theta = remora.tensor([0.7], dtype=remora.float64)
    P = remora.rem_matrix(spec, eta, nu, theta, 3, 5)
    assert P.shape == (3, 3, 5)
    v = remora.randn(2, 3, 5, 4, dtype=remora.float64)
    out = remora.rem_apply(spec, eta, nu, theta, v, 3)
    assert out.allclose(P @ v, 1e-10, 1e-12)
    q = remora.randn(2, 4, 3, 4, dtype=remora.float64)
    k = remora.randn(2, 4, 5, 4, dtype=remora.float64)
    mu = remora.zeros(3, dtype=remora.float64)
    o = remora.rsa_attention(q, k, k, spec, eta, nu, theta, mu)
    r = remora.rsa_attention_reference(q, k, k, spec=spec, eta=eta, nu=nu, theta=theta, mu=mu)
    assert o.allclose(r, 1e-10, 1e-12)
    assert remora.gate(q, q, remora.zeros(1, dtype=remora.float64)).allclose(q)


def test_wrappers_follow_the_row_text():
    """The Python signature comes from the row's C++ text alone."""
    import inspect

    from remora import _ops

    raw = next(r for r in remora._C.op_table if r[1] == "sum")
    row = ("method", "total", raw[2], raw[3], "(const Tensor& x, const Shape& dims = {}, bool keepdim = false)",
           "(const Shape& dims = {}, bool keepdim = false)", "(self, dims, keepdim)", "gradcheck")
    funcs, meths, skipped = _ops.build(table=[row])
    assert str(inspect.signature(funcs["total"])) == "(x, dims=(), keepdim=False)"
    assert str(inspect.signature(meths["total"])) == "(self, dims=(), keepdim=False)"
    x = remora.ones(2, 3)
    assert funcs["total"](x, 1).tolist() == [3.0, 3.0] and meths["total"](x).item() == 6.0
    bad = row[:4] + ("(const Tensor& x, Widget w = Widget{3})",) + row[5:]
    assert "total" in _ops.build(table=[bad])[2]


def test_cross_entropy_label_smoothing_matches_torch():
    torch = pytest.importorskip("torch")
    import numpy as np
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 5))
    target = np.array([0, 4, -100, 2, 1, 3])
    for reduction in ("mean", "sum", "none"):
        x = remora.tensor(logits, dtype=remora.float64, requires_grad=True)
        ours = remora.cross_entropy(x, remora.tensor(target), reduction=reduction, label_smoothing=0.1)
        ours.sum().backward()
        tx = torch.tensor(logits, requires_grad=True)
        ref = torch.nn.functional.cross_entropy(tx, torch.tensor(target), reduction=reduction, label_smoothing=0.1)
        ref.sum().backward()
        assert np.allclose(np.array(ours.tolist()), ref.detach().numpy(), atol=1e-12)
        assert np.allclose(np.array(x.grad.tolist()), tx.grad.numpy(), atol=1e-12)
    with pytest.raises(remora.Error, match="label_smoothing must be in"):
        remora.cross_entropy(x, remora.tensor(target), label_smoothing=1.5)
