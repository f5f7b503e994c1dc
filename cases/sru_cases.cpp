// SPDX-License-Identifier: BSD-3-Clause
// Cases of sru_recurrence (docs/math.md#gradient-checks), for every input: U, x, v, b and c0,
// with and without the dropout mask, bidirectional and k = 4, plus the
// composed reference and backend-only kernel edges. The checked output joins
// h, c and c_last, so all three gradient paths (dh, dc, dc_last) enter the
// backward.
#include "../ops/ops.h"
#include "../ops/sru.h"
#include "cases.h"

namespace remora::cases {

namespace {

// A dropout-style mask [B, D]: 0 or 1 / (1 - p) with p = 0.25 (a constant input).
Tensor drop_mask(Maker& m, int64_t B, int64_t D) {
  std::vector<double> v;
  for (int64_t i = 0; i < B * D; ++i) v.push_back(i % 3 == 1 ? 0.0 : 1.0 / 0.75);
  return m.floats(v, {B, D});
}

Tensor joined(const SruOutput& o) {
  return cat({o.h.reshape({-1}), o.c.reshape({-1}), o.c_last.reshape({-1})}, 0);
}

using Sru = SruOutput (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, bool);

// One configuration for the fused op and the composed reference.
// Inputs: U, x (k = 3, else undefined), v, b, c0 (or undefined), mask (or undefined).
void add_sru(const std::string& variant, int64_t L, int64_t B, int64_t D, int64_t k, bool c0, bool mask,
             bool bidir, bool h_only, bool strided, bool backend_only) {
  for (bool ref : {false, true}) {
    if (ref && L * B * D > 4096) continue;  // the reference loops over steps in autograd: keep it small
    const Sru f = ref ? static_cast<Sru>(&sru_recurrence_reference) : static_cast<Sru>(&sru_recurrence);
    add(ref ? "sru_recurrence_reference" : "sru_recurrence", variant,
        [=](Maker& m) {
          Inputs in{strided ? m.strided_leaf({L, B, D, k}) : m.leaf({L, B, D, k})};
          in.push_back(k == 3 ? (strided ? m.strided_leaf({L, B, D}) : m.leaf({L, B, D})) : Tensor());
          in.push_back(m.leaf({2, D}, -1, 1));
          in.push_back(m.leaf({2, D}, -1, 1));
          in.push_back(c0 ? m.leaf({B, D}) : Tensor());
          in.push_back(mask ? drop_mask(m, B, D) : Tensor());
          return in;
        },
        [=](const Inputs& x) {
          SruOutput o = f(x[0], x[1], x[2], x[3], x[4], x[5], bidir);
          return h_only ? o.h : joined(o);
        },
        {}, backend_only);
  }
}

}  // namespace

void register_sru_cases() {
  constexpr int64_t L = 4, B = 2, D = 4;
  //      variant                      L  B  D  k  c0     mask   bidir  h_only strided backend_only
  add_sru("k3",                        L, B, D, 3, false, false, false, false, false, false);
  add_sru("k3_c0_mask_noncontiguous",  L, B, D, 3, true,  true,  false, false, true,  false);
  add_sru("k3_bidirectional_c0",       L, B, D, 3, true,  false, true,  false, false, false);
  add_sru("k4_c0",                     L, B, D, 4, true,  false, false, false, false, false);
  add_sru("k4_bidirectional_c0_mask",  L, B, D, 4, true,  true,  true,  false, false, false);
  // Only h used (dc and dc_last stay undefined in the backward).
  add_sru("k3_h_only_mask",            L, B, D, 3, true,  true,  false, true,  false, false);
  // Kernel edges: lanes not a multiple of a block, one step, long sequences.
  add_sru("lanes_not_multiple_of_block", 5, 3, 333, 3, true, true, false, false, false, true);
  add_sru("one_step_one_lane",           1, 1, 1, 4, true, false, false, false, false, true);
  add_sru("long_bidirectional",          700, 2, 70, 4, true, true, true, false, false, true);
  add_sru("many_lanes",                  3, 300, 1100, 3, false, false, false, false, false, true);
}

}  // namespace remora::cases
