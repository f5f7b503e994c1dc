// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The nn layer library and optimizers (namespaces remora::nn, remora::nn::init,
/// remora::optim). See module.h for the Module tour.
#pragma once
#include "activation.h"
#include "adaptive.h"
#include "container.h"
#include "functional.h"
#include "init.h"
#include "layers.h"
#include "loss.h"
#include "lr_scheduler.h"
#include "module.h"
#include "optim.h"
#include "ordered_dict.h"
#include "options.h"
#include "rnn.h"
#include "rsa.h"
