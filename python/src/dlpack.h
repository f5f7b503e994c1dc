// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The DLPack C ABI (the exchange format of __dlpack__ / from_dlpack), as the
/// DLPack specification defines it (https://dmlc.github.io/dlpack/latest/):
/// the unversioned DLManagedTensor that every producer and consumer of the
/// Python protocol understands. Only what Remora's Python module uses.
#pragma once
#include <cstdint>

extern "C" {

/// Where the memory lives.
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
} DLDeviceType;

/// A device: its type and ordinal.
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/// The element type's kind.
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
} DLDataTypeCode;

/// An element type: code, bits per lane, lanes (1 for scalars).
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/// A strided view of memory. shape and strides have ndim entries; strides are
/// in elements and may be null (row-major contiguous).
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/// A DLTensor with its owner: the consumer calls deleter(self) exactly once
/// when it no longer needs the memory.
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

}  // extern "C"
