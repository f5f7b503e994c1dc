// SPDX-License-Identifier: BSD-3-Clause
// `remora train --memory-report`: where a run's resident memory goes.
//
// Samples the process's resident set (VmRSS, and VmHWM: the peak) and the
// device allocator's statistics at named stages of a run, and prints one table
// at the end: what the libraries cost at startup, what the data and the model
// added, what the first step added (activations, gradients, optimizer state),
// the allocator's peak of live and reserved bytes, and the peak RSS.
#pragma once
#include <string>
#include <vector>

#include "../backends/backend.h"

namespace remora {
namespace driver {

// Resident memory of this process in bytes (/proc/self/status; 0 elsewhere).
struct ResidentMemory {
  double rss = 0;   // VmRSS now
  double peak = 0;  // VmHWM: the peak so far
};
ResidentMemory resident_memory();

class MemoryReport {
 public:
  MemoryReport(bool on, Device dev) : on_(on), dev_(dev) {}
  bool on() const { return on_; }
  // Records the resident memory and the allocator's statistics after `stage`.
  void mark(const std::string& stage);
  // Exact byte counts the table sets beside the measurements (0: unknown).
  void set_bytes(double parameters, double gradients, double optimizer_state) {
    params_ = parameters, grads_ = gradients, opt_state_ = optimizer_state;
  }
  // The table, one line per stage, then the allocator and the peak.
  std::string table() const;

 private:
  struct Sample {
    std::string stage;
    ResidentMemory mem;
    MemoryStats alloc;
  };
  bool on_;
  Device dev_;
  std::vector<Sample> samples_;
  double params_ = 0, grads_ = 0, opt_state_ = 0;
};

}  // namespace driver
}  // namespace remora
