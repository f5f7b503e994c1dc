// SPDX-License-Identifier: BSD-3-Clause
// The scores of sequence classification and regression as GLUE and
// CodeXGLUE report them (task "labelled", cli/tasks/labelled.cpp):
//
//   accuracy      the fraction of predictions equal to the gold label
//   f1            binary: F1 of the positive class; more classes: the macro
//                 average of the per-class F1 over the classes that occur in
//                 the gold labels or the predictions (scikit-learn's
//                 f1_score(average="macro"))
//   matthews      Matthews correlation; for more than two classes its
//                 multi-class form (Gorodkin 2004, scikit-learn's
//                 matthews_corrcoef)
//   pearson       Pearson's r of predictions and gold values
//   spearman      Spearman's rho: Pearson's r of the ranks, tied values
//                 sharing their average rank
//
// A score that is undefined (a class never predicted nor present, a constant
// prediction) is 0, as scikit-learn reports it, so that a metrics line holds
// numbers only. Class ids are integers >= 0; the vectors of one call have the
// same length (an Error otherwise).
#pragma once
#include <cstdint>
#include <vector>

namespace remora {
namespace driver {
namespace glue {

double accuracy(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
// F1 of class `positive`: 2 tp / (2 tp + fp + fn); 0 when that is 0 / 0.
double f1_of(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold, int64_t positive);
double f1_macro(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
double matthews(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);
// Ranks 1..n of x in increasing order; equal values get the mean of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& x);

}  // namespace glue
}  // namespace driver
}  // namespace remora
