// Hostile-input checks and narrow parser entry points of the driver (issue 15),
// kept in one small file so the fuzz targets (tests/fuzz/) call exactly the
// code the `remora` commands run.
//
//   parse_ids        what `remora infer --input FILE` does with the file's bytes
//   check_finite     every floating tensor of a checkpoint is finite (else the
//                    error names the tensor), run by checkpoint loading and infer
//   check_carried_state  a checkpoint's carried state (state.*) fits the model
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "../../core/tensor.h"

namespace remora {
namespace driver {

// JSON nested deeper than this is refused before it is parsed: nlohmann::json
// parses deep input fine but dump() (used in error messages) and other
// recursive walks overflow the stack on it (a 2 MB file of "[[[[..." crashed
// `remora train` and `infer --input`; see docs/fuzzing.md).
constexpr int kMaxJsonDepth = 512;
// The deepest nesting of [ and { in JSON text, skipping strings; counting
// stops at kMaxJsonDepth + 1 (so the answer is cheap on hostile input).
int json_depth(const std::string& text);

// Token ids from the text of an --input file: a JSON array (one sequence), an
// array of equally long arrays (a batch), or, when `encode` is given, plain
// text encoded with it. Ids must lie in [0, vocab). `what` names the source in
// errors. Every problem is an InputError (exit 2).
std::vector<std::vector<int64_t>> parse_ids(const std::string& text, const std::string& what, int64_t vocab,
                                            const std::function<std::vector<int64_t>(const std::string&)>& encode);

// An InputError naming `path` and the first tensor with a NaN or an infinity
// (and how many non-finite values it holds). Integer tensors pass.
void check_finite(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& path);

class Experiment;
// An InputError naming `path` and the carried tensors (state.mems.N, state.rem.N,
// state.cells.N) when the state a checkpoint carries does not fit the model:
// one forward pass of a zero batch of the training shape (eval mode, no
// gradients) from that state must succeed. LM streams only (the only
// experiments that carry state); others return at once.
void check_carried_state(Experiment& ex, const std::vector<std::pair<std::string, Tensor>>& carried,
                         const std::string& path);

}  // namespace driver
}  // namespace remora
