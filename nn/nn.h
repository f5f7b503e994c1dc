// The nn layer library and optimizers (namespaces remora::nn, remora::nn::init,
// remora::optim). See module.h for the Module tour.
#pragma once
#include "adaptive.h"
#include "init.h"
#include "layers.h"
#include "module.h"
#include "optim.h"
#include "options.h"
#include "rnn.h"
#include "rsa.h"
