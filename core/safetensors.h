// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// safetensors (`docs/math.md#checkpoints-the-safetensors-format`): u64 little-endian header length N, N bytes of JSON,
/// then the data buffer. Loading validates everything and reports malformed
/// files with a remora::Error that names the file and the problem.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor.h"

namespace remora {

/// The contents of a safetensors file: its tensors (contiguous, on the CPU,
/// without history) and its metadata.
struct Safetensors {
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< (name, tensor) in file order (by offset)
  std::map<std::string, std::string> metadata;          ///< the header's "__metadata__" strings
  /// Each tensor's dtype as the file stores it ("I32", "BF16", ...): loading
  /// widens I32/I16/I8/U8/BOOL to i64 and F16/BF16 to f32, so messages about a
  /// tensor's type should name this one.
  std::map<std::string, std::string> stored_dtypes;
  /// The tensor called name; a clear Error listing a few names when absent.
  const Tensor& get(const std::string& name) const;
  /// Whether a tensor called name is present.
  bool contains(const std::string& name) const;
};

/// How load_safetensors maps stored dtypes (both off by default: floating
/// tensors load as f32 or f64, integer and bool tensors as i64).
struct SafetensorsLoad {
  /// F16 / BF16 tensors load as f16 / bf16 (the stored bits, half the memory
  /// of f32) instead of being widened to f32.
  bool keep_16bit = false;
  /// I32, U8 and BOOL tensors load as DType::i32, u8 and b8 (bool) instead of
  /// being widened to i64 (I16 and I8 still become i64).
  bool keep_integers = false;
};

/// \name Loading
/// Loads F32/F64/I64 as is; F16/BF16 become f32 (or stay 16-bit with
/// keep_16bit), I32/I16/I8/U8/BOOL become i64 (or I32/U8/BOOL stay, with keep_integers).
/// The tensors are on the CPU. Every malformed input is an Error naming the
/// file (or `what`) and the problem: a short file, a header over 100 MB or
/// not a JSON object, a name given twice, an unknown dtype, a shape whose size
/// overflows or with more than 8 dims, data_offsets that do not match the
/// shape, or holes, overlaps or trailing bytes in the data buffer.
/// @{
//
/// Reads the regular file path (refused with an Error when it is larger than
/// the memory available, available_memory()) with the default dtype mapping.
Safetensors load_safetensors(const std::string& path);
/// Reads the regular file path, mapping dtypes as `how` says.
Safetensors load_safetensors(const std::string& path, const SafetensorsLoad& how);
/// Parses a whole file's bytes with the default dtype mapping; `what` names
/// the source in errors.
Safetensors parse_safetensors(const std::string& bytes, const std::string& what = "buffer");
/// keep_dtypes: every tensor keeps its stored dtype (keep_16bit and keep_integers).
Safetensors load_safetensors(const std::string& path, bool keep_dtypes);
/// parse_safetensors with keep_16bit and keep_integers both set to keep_dtypes.
Safetensors parse_safetensors(const std::string& bytes, const std::string& what, bool keep_dtypes);
/// Parses a whole file's bytes, mapping dtypes as `how` says.
Safetensors parse_safetensors(const std::string& bytes, const std::string& what,
                              const SafetensorsLoad& how);
/// @}

/// Writes atomically: a temporary file beside `path`, fsync, rename. Tensors are
/// written as their own dtype (F32, F64, I64, BOOL, I32, U8, BF16 or F16),
/// contiguous, little-endian, from any device (copied to the host), without
/// their history. A repeated name or an undefined tensor is an Error;
/// metadata goes to "__metadata__" (omitted when empty).
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
/// The bytes save_safetensors writes, as a string (the whole file in memory).
std::string serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

}  // namespace remora
