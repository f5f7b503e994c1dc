#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/golden_half.safetensors: bf16 and f16 tensors as PyTorch
stores them (the layout of Hugging Face checkpoints saved in bf16 / f16), with
the f32 values PyTorch converts them to and PyTorch's own f32 -> bf16 / f16
roundings, which tests/test_half.cpp reads back.

    /work/.venv-hf/bin/python tools/goldens/make_half_goldens.py

Tensors:
  w_bf16 [3, 5] bf16, w_bf16_f32 [3, 5] f32: a small weight and its values;
  w_f16 [4] f16, w_f16_f32 [4] f32: the same for f16;
  src_f32 [N] f32: values whose roundings are tested (ties, subnormals,
    overflow, +-inf, NaN, random), to_bf16 [N] bf16 and to_f16 [N] f16:
    PyTorch's src_f32.to(torch.bfloat16) / .to(torch.float16).
"""
import math
import os

import torch
from safetensors.torch import save_file

torch.manual_seed(0)
w = torch.randn(3, 5) * 0.02
w_bf16 = w.to(torch.bfloat16)
w_f16 = torch.tensor([1.0, -2.5, 65504.0, 6.0e-8]).to(torch.float16)

special = [
    0.0, -0.0, 1.0, -1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -20,
    1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 65504.0, 65519.0, 65520.0, 1.0e5,
    2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -126, 2.0 ** -133, 2.0 ** -134,
    3.3895313892515355e38, 3.3961775292304797e38, float("inf"), float("-inf"), float("nan"),
    0.1, -0.3, math.pi, 1e-3, 1e-6, 123456.789,
]
rnd = (torch.randn(200) * torch.exp(torch.randn(200) * 4)).tolist()
src = torch.tensor(special + rnd, dtype=torch.float32)

out = {
    "w_bf16": w_bf16.contiguous(),
    "w_bf16_f32": w_bf16.to(torch.float32).contiguous(),
    "w_f16": w_f16.contiguous(),
    "w_f16_f32": w_f16.to(torch.float32).contiguous(),
    "src_f32": src,
    "to_bf16": src.to(torch.bfloat16),
    "to_f16": src.to(torch.float16),
}
path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "golden_half.safetensors")
save_file(out, path)
print("wrote", os.path.normpath(path))
