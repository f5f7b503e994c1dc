// SPDX-License-Identifier: BSD-3-Clause
#include "loss.h"

#include <sstream>

namespace remora {
namespace nn {

std::string reduction_name(Reduction r) {
  switch (r) {
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
    case Reduction::none: return "none";
  }
  return "?";
}

std::string SmoothL1Loss::extra_repr() const {
  std::ostringstream os;
  os << "reduction=" << reduction_name(options.reduction()) << ", beta=" << options.beta();
  return os.str();
}

std::string CrossEntropyLoss::extra_repr() const {
  std::ostringstream os;
  os << "ignore_index=" << options.ignore_index() << ", reduction=" << reduction_name(options.reduction())
     << ", label_smoothing=" << options.label_smoothing();
  return os.str();
}

std::string NLLLoss::extra_repr() const {
  return "ignore_index=" + std::to_string(options.ignore_index()) + ", reduction=" +
         reduction_name(options.reduction());
}

}  // namespace nn
}  // namespace remora
