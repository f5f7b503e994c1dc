# SPDX-License-Identifier: BSD-3-Clause
"""remora.optim: SGD, Adam and AdamW (Remora's C++ optimizers; Adam and AdamW
use the fused update kernels). Give them model.parameters()."""
from . import _C

Optimizer = _C.optim.Optimizer
SGD = _C.optim.SGD
Adam = _C.optim.Adam
AdamW = _C.optim.AdamW
LRSchedule = _C.train.LRSchedule
