// SPDX-License-Identifier: BSD-3-Clause
// The REM initialisation of a config's attention (shared by the transformer types).
#pragma once
#include "../../nn/rsa.h"
#include "../config.h"

namespace remora {
namespace driver {

inline nn::RemInit rem_init_of(const RemConfig& r) {
  nn::RemInit in;
  in.eta_range = r.eta_range;
  in.nu_range = r.nu_range;
  in.theta = r.theta;
  in.mu_range = r.mu_range;
  in.eta = r.eta;
  in.nu = r.nu;
  in.thetas = r.thetas;
  in.mu = r.mu;
  in.closed_gate = r.closed_gate;
  return in;
}

}  // namespace driver
}  // namespace remora
