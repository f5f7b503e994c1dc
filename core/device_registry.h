// SPDX-License-Identifier: BSD-3-Clause
// Devices as core sees them: the memory interface every device implements
// (DeviceAllocator) and the registry that maps a DeviceType to the code that
// runs it. A device library registers a factory for its type when it loads
// (a static initialiser: backends/cpu/cpu_backend.cpp, backends/cuda/
// cuda_backend.cu); nothing in core names a device beyond DeviceType, so a new
// device is a library that registers itself, not an edit here.
//
// The factory returns the device's DeviceAllocator; backends/backend.h's
// Backend derives from it and adds the kernels, and backend(dev) is the typed
// lookup the rest of Remora uses.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dtype.h"

namespace remora {

// A device allocator's statistics (bytes; backends/caching_allocator.h keeps them).
struct MemoryStats {
  size_t in_use = 0;         // bytes handed out (rounded), cached-size blocks only
  size_t small_in_use = 0;   // bytes handed out below min_cached (straight from Raw)
  size_t cached = 0;         // free bytes kept in segments
  size_t reserved = 0;       // bytes held from Raw in segments (in_use + cached)
  size_t peak_reserved = 0;
  size_t peak_in_use = 0;    // peak of in_use
  size_t peak_live = 0;      // peak of in_use + small_in_use: every live tensor byte
  uint64_t raw_allocs = 0;   // segments (and bypassed blocks) taken from Raw
  uint64_t raw_frees = 0;    // segments (and bypassed blocks) given back
  uint64_t hits = 0;         // requests served from the cache
  uint64_t splits = 0;       // cached blocks split on a hit
  uint64_t oom_retries = 0;  // Raw failures answered by releasing the cache
  size_t segments = 0;       // live segments
  size_t cap = 0;            // the cache's bound on cached bytes (its options)
  size_t min_cached = 0;     // smaller requests bypass the cache
};

// The memory of one device (one index of a device type).
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // nbytes of device memory (null for 0 bytes is allowed); free takes the size
  // alloc was given.
  virtual void* alloc(size_t nbytes) = 0;
  virtual void free(void* p, size_t nbytes) = 0;
  // Copies between host memory and this device's memory, in the device's
  // queue order (they return once the host side may be reused or read).
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes) = 0;
  // The allocator's statistics (zeros for a device without a cache) and its
  // release: every wholly free cached segment goes back to the system.
  virtual MemoryStats memory_stats() const { return {}; }
  virtual void empty_cache() {}
};

// The device of `index` of a type, or null when that index does not exist on
// this machine. Called on every lookup: return a long-lived object.
using DeviceFactory = DeviceAllocator* (*)(int index);

// The registry has room for this many device types (DeviceType's values).
constexpr int kMaxDeviceTypes = 16;

// Registers (or replaces) the factory of a device type; a device library
// calls it from a static initialiser as it loads.
void register_device(DeviceType type, DeviceFactory factory);
// The registered factory of a type, or null when no library registered one.
DeviceFactory device_factory(DeviceType type);

}  // namespace remora
