// SPDX-License-Identifier: BSD-3-Clause
// The device registry (device_registry.h): one factory per DeviceType.
#include "device_registry.h"

#include <atomic>

#include "error.h"

namespace remora {

namespace {
// Written when a device library loads (possibly on another thread than the
// lookups: the CUDA plugin is loaded on first use), hence atomics.
std::atomic<DeviceFactory>& slot(DeviceType type) {
  static std::atomic<DeviceFactory> slots[kMaxDeviceTypes] = {};
  const int i = int(type);
  REMORA_CHECK(i >= 0 && i < kMaxDeviceTypes,
               "device registry: device type " << i << " is beyond its " << kMaxDeviceTypes << " types");
  return slots[i];
}
}  // namespace

void register_device(DeviceType type, DeviceFactory factory) { slot(type).store(factory); }

DeviceFactory device_factory(DeviceType type) { return slot(type).load(); }

}  // namespace remora
