// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Devices as core sees them: the memory interface every device implements
/// (DeviceAllocator) and the registry that maps a DeviceType to the code that
/// runs it. A device library registers a factory for its type when it loads
/// (a static initialiser: backends/cpu/cpu_backend.cpp, backends/cuda/
/// cuda_backend.cu); nothing in core names a device beyond DeviceType, so a new
/// device is a library that registers itself, not an edit here.
///
/// The factory returns the device's DeviceAllocator; backends/backend.h's
/// Backend derives from it and adds the kernels, and backend(dev) is the typed
/// lookup the rest of Remora uses.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dtype.h"

namespace remora {

/// A device allocator's statistics (DeviceAllocator::memory_stats; the caching
/// allocator of the CPU and CUDA backends keeps them). Sizes are in bytes;
/// "Raw" is the device's underlying allocator (aligned_alloc on the host,
/// cudaMalloc on a GPU), whose allocations the cache calls segments.
struct MemoryStats {
  size_t in_use = 0;         ///< bytes handed out (rounded), cached-size blocks only
  size_t small_in_use = 0;   ///< bytes handed out below min_cached (straight from Raw)
  size_t cached = 0;         ///< free bytes kept in segments
  size_t reserved = 0;       ///< bytes held from Raw in segments (in_use + cached)
  /// peak of reserved
  size_t peak_reserved = 0;
  size_t peak_in_use = 0;    ///< peak of in_use
  size_t peak_live = 0;      ///< peak of in_use + small_in_use: every live tensor byte
  uint64_t raw_allocs = 0;   ///< segments (and bypassed blocks) taken from Raw
  uint64_t raw_frees = 0;    ///< segments (and bypassed blocks) given back
  uint64_t hits = 0;         ///< requests served from the cache
  uint64_t splits = 0;       ///< cached blocks split on a hit
  uint64_t oom_retries = 0;  ///< Raw failures answered by releasing the cache
  size_t segments = 0;       ///< live segments
  size_t cap = 0;            ///< the cache's bound on cached bytes (its options)
  size_t min_cached = 0;     ///< smaller requests bypass the cache
};

/// The memory of one device (one index of a device type): what core needs of a
/// device. backends/backend.h's Backend derives from it and adds the kernels.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  /// nbytes of device memory (null for 0 bytes is allowed). A refusal is an
  /// OutOfMemoryError in the built-in backends.
  virtual void* alloc(size_t nbytes) = 0;
  /// Frees p, which alloc returned for nbytes (free takes the size alloc was given).
  virtual void free(void* p, size_t nbytes) = 0;
  /// Copies nbytes from host memory src to this device's memory dst, in the
  /// device's queue order (returns once src may be reused).
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes) = 0;
  /// Copies nbytes from this device's memory src to host memory dst, in the
  /// device's queue order (returns once dst may be read).
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes) = 0;
  /// The allocator's statistics (zeros for a device without a cache).
  virtual MemoryStats memory_stats() const { return {}; }
  /// Releases the cache: every wholly free cached segment goes back to the
  /// system (nothing for a device without a cache).
  virtual void empty_cache() {}
};

/// The device of `index` of a type, or null when that index does not exist on
/// this machine. Called on every lookup: return a long-lived object.
using DeviceFactory = DeviceAllocator* (*)(int index);

/// The registry has room for this many device types (DeviceType's values).
constexpr int kMaxDeviceTypes = 16;

/// Registers (or replaces) the factory of a device type; a device library
/// calls it from a static initialiser as it loads. Thread-safe.
void register_device(DeviceType type, DeviceFactory factory);
/// The registered factory of a type, or null when no library registered one.
DeviceFactory device_factory(DeviceType type);

}  // namespace remora
