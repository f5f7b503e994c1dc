// Remora: a small deep-learning framework for recurrence-in-attention research.
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
// Layers: core/ (Tensor, autograd, Generator) -> ops/ (differentiable ops)
// -> backends/ (kernels). See README.md for the tour.
#pragma once

#include "autograd.h"
#include "generator.h"
#include "tensor.h"
#include "../ops/gradcheck.h"
#include "../ops/losses.h"
#include "../ops/ops.h"
#include "../ops/rem.h"
#include "../ops/sru.h"
#include "../core/safetensors.h"
#include "../nn/nn.h"
