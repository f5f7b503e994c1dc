// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// TensorBoard event files: the training curves in TensorBoard's own format.
///
/// \code
///   EventWriter w("runs/x/events.out.tfevents.1700000000.host.42");
///   w.scalars(/*step=*/10, /*wall_time=*/1.7e9, {{"train/loss", 2.31}});
///   // tensorboard --logdir runs/x
/// \endcode
///
/// An event file is a sequence of TFRecords (length, masked CRC-32C, payload,
/// masked CRC-32C), each payload one `Event` protocol buffer: the first holds
/// file_version "brain.Event:2", then one per record with its step, wall time
/// and a `Summary` of scalar values. The encoding is written out by hand (a few
/// fields of a stable format), so there is no protobuf dependency.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace remora {
namespace train {

/// Appends events to one TensorBoard event file.
class EventWriter {
 public:
  /// Creates (or appends to) the file and writes the file_version event when it
  /// is new (or empty), stamped \p wall_time (seconds since the epoch; < 0: now).
  /// A path that cannot be opened as a regular file throws SetupError (trainer.h).
  explicit EventWriter(const std::string& path, double wall_time = -1);
  ~EventWriter();  ///< Closes the file.
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  /// One event at \p step and \p wall_time (seconds since the epoch) with a
  /// scalar per (tag, value); values are stored as 32-bit floats. A failed
  /// write throws TrainingFailure (trainer.h).
  void scalars(int64_t step, double wall_time, const std::vector<std::pair<std::string, double>>& values);
  /// A restart event (TensorBoard's SessionLog START) at `step`: TensorBoard
  /// drops the points after `step` that an interrupted run wrote before (used
  /// when a run resumes from a checkpoint).
  void restart(int64_t step, double wall_time);
  const std::string& path() const { return path_; }  ///< The event file.

 private:
  void record(const std::string& payload);
  std::string path_;
  int fd_ = -1;
};

/// CRC-32C (Castagnoli) of n bytes.
uint32_t crc32c(const void* data, size_t n);
/// The TFRecord mask of crc32c(data, n): ((c >> 15) | (c << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);

}  // namespace train
}  // namespace remora
