// SPDX-License-Identifier: BSD-3-Clause
// The core of Remora: Tensor, autograd, Generator and safetensors I/O. core/ includes
// nothing above it (no ops/, nn/, models/); <remora/remora.h> (tools/cmake/remora.h)
// is the umbrella for the whole library.
//
//   #include <remora/remora.h>
//   using namespace remora;
//
//   Tensor x = Tensor::randn({3, 4}, DType::f64).requires_grad_();
//   Tensor y = (x * x).sum();
//   y.backward();                       // x.grad() == 2 * x
//
//   {
//     NoGradGuard no_grad;              // no history inside this scope
//     x.add_(x.grad(), -0.1);           // an SGD step
//   }
//
// Tensor's math methods, operators and the factories that fill or draw (sum, *,
// randn, ... above) are declared in core/tensor.h and defined in ops/, which
// libremora links in; a program on the object library remora_core alone (core
// and the backends, tests/core/) has the rest. docs/architecture.md has the layers.
#pragma once

#include "autocast.h"
#include "autograd.h"
#include "activation_checkpoint.h"
#include "dtype.h"
#include "error.h"
#include "generator.h"
#include "safetensors.h"
#include "tensor.h"
