# SPDX-License-Identifier: BSD-3-Clause
"""Remora from Python: tensors with autograd, the op table, nn modules (RSA
attention, RNN / LSTM) and reference models (Transformer-XL, BERT, SRU++,
StarSaber, recurrent LMs), optimizers, the Trainer, tokenizers, safetensors,
and zero-copy exchange with NumPy, PyTorch and any DLPack producer.

    import remora
    x = remora.randn(3, 4, dtype=remora.float64, requires_grad=True)
    (x * x).sum().backward()          # x.grad == 2 * x

remora.torch (imported on its own) runs Remora's ops inside PyTorch models.
docs/python.md is the guide.
"""
import builtins as _builtins
import functools as _functools

from . import _C
from . import _ops

__version__ = _C.__version__

Error = _C.Error
Error.__doc__ = "An error of Remora's C++ library (remora::Error), with its message; a RuntimeError."
Tensor = _C.Tensor
dtype = _C.dtype
device = _C.device
Generator = _C.Generator
Reduction = _C.Reduction
RemSpec = _C.RemSpec

float32 = dtype.float32
float64 = dtype.float64
bfloat16 = dtype.bfloat16
float16 = dtype.float16
int64 = dtype.int64
int32 = dtype.int32
uint8 = dtype.uint8
bool_ = dtype.bool
double = float64
half = float16
long = int64

manual_seed = _C.manual_seed
default_generator = _C.default_generator
set_num_threads = _C.set_num_threads
get_num_threads = _C.get_num_threads
is_grad_enabled = _C.is_grad_enabled
set_grad_enabled = _C.set_grad_enabled
cuda_is_available = _C.cuda_is_available
build_info = _C.build_info
from_numpy = _C.from_numpy
from_dlpack = _C.from_dlpack
to_dlpack = _C.to_dlpack
load_file = _C.load_file
save_file = _C.save_file
load_file_metadata = _C.load_file_metadata

# The hand-bound ops of ops/rem.h and ops/losses.h.
gate = _C.gate
rem_matrix = _C.rem_matrix
rem_apply = _C.rem_apply
rsa_attention = _C.rsa_attention
mse_loss = _C.mse_loss
l1_loss = _C.l1_loss
smooth_l1_loss = _C.smooth_l1_loss
nll_loss = _C.nll_loss
binary_cross_entropy_with_logits = _C.binary_cross_entropy_with_logits


def _shape_args(shape):
    if len(shape) == 1 and not isinstance(shape[0], int):
        return list(shape[0])
    return list(shape)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of data: nested lists of numbers, a NumPy
    array (or any buffer), a DLPack producer (a torch tensor), or a Tensor. Lists of ints give int64, of bools
    bool, otherwise float32, unless dtype is given."""
    if isinstance(data, Tensor):
        t = data.detach().clone()
    elif not isinstance(data, (list, tuple, int, _builtins.float, _builtins.bool)) and _is_buffer(data):
        t = from_numpy(data).clone()
    elif hasattr(data, "__dlpack__"):
        t = from_dlpack(data).clone()
    elif isinstance(data, (int, _builtins.float, _builtins.bool)):
        return _C._tensor_from_list([data], dtype, device, requires_grad).reshape(())
    else:
        return _C._tensor_from_list(data, dtype, device, requires_grad)
    if dtype is not None:
        t = t.to(dtype)
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _is_buffer(obj):
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros: zeros(2, 3) or zeros((2, 3)); float32 on the CPU by default."""
    return _C._zeros(_shape_args(shape), dtype, device, requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    """A tensor of ones: ones(2, 3) or ones((2, 3))."""
    return _C._ones(_shape_args(shape), dtype, device, requires_grad)


def empty(*shape, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of the given shape."""
    return _C._empty(_shape_args(shape), dtype, device, requires_grad)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of the given shape filled with fill_value."""
    return _C._full(_shape_args((shape,)), _builtins.float(fill_value), dtype, device, requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False, generator=None):
    """N(0, 1) draws from generator (default: the global one, seeded by manual_seed)."""
    return _C._randn(_shape_args(shape), dtype, device, requires_grad, generator)


def rand(*shape, dtype=None, device=None, requires_grad=False, generator=None):
    """U[0, 1) draws from generator (default: the global one)."""
    return _C._rand(_shape_args(shape), dtype, device, requires_grad, generator)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """[start, start + step, ...) up to end; int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = int64 if _builtins.all(isinstance(v, int) for v in (start, end, step)) else float32
    f = _builtins.float
    return _C._arange(f(start), f(end), f(step), dtype, device, requires_grad)


def zeros_like(t, dtype=None):
    """Zeros of t's shape, dtype (unless given) and device."""
    return zeros(t.shape, dtype=dtype or t.dtype, device=t.device)


def ones_like(t, dtype=None):
    """Ones of t's shape, dtype (unless given) and device."""
    return ones(t.shape, dtype=dtype or t.dtype, device=t.device)


def randn_like(t, dtype=None):
    """N(0, 1) draws of t's shape, dtype (unless given) and device."""
    return randn(t.shape, dtype=dtype or t.dtype, device=t.device)


class no_grad:
    """Context manager (and decorator) that turns history recording off on
    this thread, restoring the previous mode on exit (Remora's NoGradGuard)."""

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C.set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class enable_grad(no_grad):
    """Context manager (and decorator) that turns history recording on inside no_grad."""

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C.set_grad_enabled(True)
        return self


# ---- Tensor methods written in Python ----
def _numpy(self):
    """A NumPy array sharing this tensor's memory (CPU, no grad: see detach())."""
    import numpy

    return numpy.asarray(self)


def _iter(self):
    """Iterates over dim 0 (views)."""
    for i in range(len(self)):
        yield self[i]


Tensor.numpy = _numpy
Tensor.__iter__ = _iter
Tensor.__array_priority__ = 1000  # NumPy defers binary operators to Tensor

# ---- the op table ----
skipped_ops = _ops.install(globals(), Tensor)
"""{name: reason}: the op-table rows without a Python form."""


def rsa_attention_reference(q, k, v, **kwargs):
    """rsa_attention through the composed reference path (ops/rem.h); same arguments."""
    return rsa_attention(q, k, v, reference=True, **kwargs)


skipped_ops.pop("rsa_attention_reference", None)

from . import nn, optim, text, train  # noqa: E402

# torch's spellings (defined last: they shadow builtins inside this module).
bool = bool_  # noqa: A001
float = float32  # noqa: A001
