# SPDX-License-Identifier: BSD-3-Clause
"""Zero copy with NumPy: buffers, __array_interface__, DLPack, and their lifetimes."""
import gc
import weakref

import numpy as np
import pytest

import remora


def test_from_numpy_shares_memory():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = remora.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data
    assert t.dtype == remora.float64 and t.shape == (3, 4)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t[1, 1] = -1
    assert a[1, 1] == -1


def test_from_numpy_strided_and_dtypes():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]
    t = remora.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data and t.stride() == (12, 2)
    assert t.tolist() == a.tolist()
    for dt, rd in ((np.float32, remora.float32), (np.int64, remora.int64), (np.int32, remora.int32),
                   (np.uint8, remora.uint8), (np.bool_, remora.bool_), (np.float16, remora.float16)):
        assert remora.from_numpy(np.zeros(3, dtype=dt)).dtype == rd
    with pytest.raises(remora.Error, match="negative"):
        remora.from_numpy(np.arange(4.0)[::-1])
    with pytest.raises(remora.Error, match="no Remora dtype"):
        remora.from_numpy(np.zeros(2, dtype=np.complex64))


def test_from_numpy_keeps_array_alive():
    a = np.arange(5, dtype=np.float64)
    ref = weakref.ref(a)
    t = remora.from_numpy(a)
    v = t[1:]
    del a, t
    gc.collect()
    assert ref() is not None and v.tolist() == [1, 2, 3, 4]  # the view keeps the storage and the array
    del v
    gc.collect()
    assert ref() is None  # released (under the GIL) with the last tensor
    b = remora.from_numpy(np.arange(3, dtype=np.float64))  # the only owner is the tensor
    gc.collect()
    assert b.tolist() == [0, 1, 2]


def test_numpy_shares_memory():
    t = remora.randn(3, 4)
    n = t.numpy()
    assert n.ctypes.data == t.data_ptr() and n.dtype == np.float32 and n.shape == (3, 4)
    n[0, 0] = 5
    assert t[0, 0].item() == 5
    tt = t.transpose(0, 1)
    assert np.asarray(tt).strides == (4, 16)
    del t, tt
    gc.collect()
    assert n[0, 0] == 5  # the array keeps the tensor
    with pytest.raises(remora.Error, match="requires grad"):
        remora.randn(2, requires_grad=True).numpy()
    assert remora.tensor([True]).numpy().dtype == np.bool_


def test_array_interface():
    t = remora.arange(6).reshape(2, 3)
    ai = t.__array_interface__
    assert ai["shape"] == (2, 3) and ai["typestr"] == "<i8" and ai["data"][0] == t.data_ptr()


def test_dlpack_roundtrip_with_numpy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = remora.from_dlpack(a)
    assert t.data_ptr() == a.ctypes.data
    back = np.from_dlpack(t)
    assert back.ctypes.data == t.data_ptr()
    t[0, 0] = 9
    assert a[0, 0] == 9 and back[0, 0] == 9


def test_dlpack_capsule_rules():
    t = remora.randn(4)
    cap = t.__dlpack__()
    assert "dltensor" in repr(cap)
    u = remora.from_dlpack(cap)
    assert u.data_ptr() == t.data_ptr()
    assert "used_dltensor" in repr(cap)
    with pytest.raises(remora.Error, match="consumed once"):
        remora.from_dlpack(cap)
    del cap
    gc.collect()
    assert u.tolist() == t.tolist()
    cap2 = t.__dlpack__()  # never consumed: its destructor frees it
    del cap2
    gc.collect()
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(remora.Error, match="requires grad"):
        remora.randn(2, requires_grad=True).__dlpack__()


def test_dlpack_array_api_keywords():
    """__dlpack__ takes the array API's keywords (NumPy >= 2.1 and torch >= 2.3
    pass max_version first): the same capsule, no TypeError."""
    t = remora.randn(64, 64)
    u = remora.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert u.data_ptr() == t.data_ptr()
    u = remora.from_dlpack(t.__dlpack__(stream=None, max_version=(1, 1), dl_device=(1, 0), copy=False))
    assert u.data_ptr() == t.data_ptr()
    c = remora.from_dlpack(t.__dlpack__(copy=True))
    assert c.data_ptr() != t.data_ptr() and c.equal(t)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(7, 0))
