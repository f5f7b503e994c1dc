// SPDX-License-Identifier: BSD-3-Clause
// Hostile-input checks and narrow parser entry points of the driver,
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

#include "../core/safetensors.h"
#include "../core/tensor.h"
#include "../nn/module.h"

namespace remora {
namespace driver {

// JSON nested deeper than this is refused before it is parsed: nlohmann::json
// parses deep input fine but dump() (used in error messages) and other
// recursive walks overflow the stack on it (a 2 MB file of "[[[[..." crashed
// `remora train` and `infer --input`; see docs/reliability.md).
constexpr int kMaxJsonDepth = 512;
// The largest file of each kind the driver reads whole. Files are read only
// when they are regular files (core/file_io.h: a FIFO, a device or a
// directory is refused without blocking); larger ones are refused before
// reading.
constexpr uint64_t kMaxConfigBytes = 16 << 20;    // a JSON config (configs are a few KiB)
constexpr uint64_t kMaxIdsBytes = 64 << 20;       // infer --input: ids or text
constexpr uint64_t kMaxJsonlLineBytes = 1 << 20;  // one line of metrics.jsonl

// The driver's readers of user and run-directory files: core/file_io.h's
// helpers with every problem an InputError (exit 2) naming `what` and the path
// ("does not exist", "is a directory", "is a FIFO (named pipe), not a regular
// file", "permission denied", "is 3.0 GiB, more than ...").
//   read_input_file   the whole file, at most max_bytes
//   for_each_input_line  line by line (metrics.jsonl), each at most max_line_bytes
//   write_output_file_atomic  temporary beside it (never a FIFO or link), fsync, rename
//   open_append_output  a descriptor for appending, refusing a FIFO or device without blocking
std::string read_input_file(const std::string& path, uint64_t max_bytes, const std::string& what);
void for_each_input_line(const std::string& path, uint64_t max_line_bytes, const std::string& what,
                         const std::function<void(const std::string& line, int64_t number)>& f);
void write_output_file_atomic(const std::string& path, const std::string& bytes, const std::string& what);
int open_append_output(const std::string& path, const std::string& what);

// The deepest nesting of [ and { in JSON text, skipping strings; counting
// stops at kMaxJsonDepth + 1 (so the answer is cheap on hostile input).
int json_depth(const std::string& text);

// How parse_ids reads its text.
struct IdsFormat {
  bool lines = false;  // plain text: each non-empty line is one sequence
  bool text = false;   // plain text even where it starts like JSON ([ or {)
};
// Token ids from the text of an --input file: a JSON array (one sequence), an
// array of arrays (a batch), or, when `encode` is given, a JSON array of texts (a
// batch) or plain text encoded with it: the whole text as one sequence, or with
// `lines` each non-empty line as one. Text that starts like JSON (its first
// character other than white space is [ or {) must be one of those arrays: a
// malformed or other JSON value is an error, not text, unless format.text.
// Sequences of a batch may differ in length. Ids must lie in [0, vocab). `what`
// names the source in errors. Every problem is an InputError (exit 2).
std::vector<std::vector<int64_t>> parse_ids(const std::string& text, const std::string& what, int64_t vocab,
                                            const std::function<std::vector<int64_t>(const std::string&)>& encode,
                                            const IdsFormat& format = {});

// An InputError naming `path` and the first tensor with a NaN or an infinity
// (and how many non-finite values it holds). Integer tensors pass.
void check_finite(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& path);

// An InputError naming `path`, the tensor and its dtype as the file stores it
// (I32, not the i64 it is loaded as) when a floating parameter of `model` is
// stored as integers in `st`. Tensors the model does not have are left to
// load_state_dict.
void check_stored_dtypes(const Safetensors& st, const nn::Module& model, const std::string& path);

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
