// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The differentiable ops: the functions and Tensor methods of the op table
/// (ops/ops.def, one documented row per op, declared through core/tensor.h),
/// the tensor factories (ops/factories.h) and the fused Adam step's
/// hyperparameters (core/adam_step.h). REM, RSA attention, SRU, the losses and
/// adaptive softmax have headers of their own beside it (ops/rem.h, ops/sru.h,
/// ops/losses.h, ops/adaptive_softmax.h).
#pragma once
#include <vector>

#include "../core/adam_step.h"
#include "../core/tensor.h"
#include "factories.h"
