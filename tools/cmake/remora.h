// SPDX-License-Identifier: BSD-3-Clause
// <remora/remora.h>: the whole library in one include (installed at include/remora/;
// the build tree mirrors that layout, see the top-level CMakeLists.txt).
//
//   #include <remora/remora.h>
//   using namespace remora;
//
// Layers, each including only the ones below it (docs/architecture.md):
//   core/     Tensor, autograd, Generator, safetensors  (<remora/core/remora.h>)
//   backends/ Backend (memory, kernels) per device
//   ops/      differentiable ops, losses, REM, SRU, gradient checks; the
//             definitions of Tensor's math methods, operators and random factories
//   nn/       Module, layers, RNNs, RSA attention, init, optimizers
//   models/   Transformer-XL, BERT, SRU++, StarSaber, RelRNN
// Beside them, in libraries of their own (not included here):
//   distributed/     data parallelism on MPI      <remora/distributed/dist.h>, remora::remora_dist
//   train/    the Trainer                  <remora/train/trainer.h>, remora::remora_train
// Include a layer's headers instead of this one to keep a translation unit small.
#pragma once

#include "core/remora.h"

#include "ops/adaptive_softmax.h"
#include "ops/gradcheck.h"
#include "ops/losses.h"
#include "ops/ops.h"
#include "ops/rem.h"
#include "ops/sru.h"

#include "nn/nn.h"

#include "models/bert.h"
#include "models/relrnn.h"
#include "models/sequence_model.h"
#include "models/srupp.h"
#include "models/starsaber.h"
#include "models/transformer_xl.h"
