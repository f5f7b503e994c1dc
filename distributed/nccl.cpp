// SPDX-License-Identifier: BSD-3-Clause
// The NCCL communicator of a data-parallel run (dist_internal.h), one process
// per GPU, bootstrapped through MPI like Horovod and torch.distributed: rank 0
// creates the ncclUniqueId and MPI_Bcast hands it to the others. Built only
// when REMORA_WITH_NCCL (which implies MPI and the CUDA backend), as the plugin
// libremora_nccl.so (dist_internal.h): everything here is internal to it but
// remora_nccl_api, so no name can resolve to dist.cpp's forwarding functions.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "../backends/backend.h"
#include "../core/error.h"
#include "dist.h"
#include "dist_internal.h"

namespace remora {
namespace dist {
namespace detail {

namespace {
ncclComm_t g_comm = nullptr;
int g_dev = 0;  // this rank's GPU
// The CUDA backend queues everything on one non-blocking stream per device;
// collectives go on that stream too, so they run after the kernels that wrote
// their buffers and before the ones that read the results (no extra sync).
cudaStream_t backend_stream() {
  return static_cast<cudaStream_t>(backend(Device::cuda(g_dev)).native_stream());
}

void check_cuda(cudaError_t rc, const char* what) {
  REMORA_CHECK(rc == cudaSuccess,
               "dist: " << where() << ": " << what << " failed: " << cudaGetErrorString(rc));
}
void check_nccl(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess) return;
  std::string detail = ncclGetErrorString(rc);
  if (g_comm) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(g_comm, &async) == ncclSuccess && async != ncclSuccess)
      detail += std::string(" (asynchronous: ") + ncclGetErrorString(async) + ")";
  }
  REMORA_FAIL("dist: " << where() << ": " << what << " failed: " << detail
                       << " (NCCL; another rank may have died)");
}

bool plugin_usable(int local_rank, std::string* why) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n == 0) {
    if (why) *why = rc != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(rc)
                                      : std::string("no CUDA device");
    cudaGetLastError();  // clear it so the next CUDA call does not report it again
    return false;
  }
  (void)local_rank;
  return true;
}

void plugin_setup(void* mpi_comm, int rank, int world, int local_rank) {
  MPI_Comm comm = *static_cast<MPI_Comm*>(mpi_comm);
  int n = 0;
  check_cuda(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  g_dev = local_rank % n;
  check_cuda(cudaSetDevice(g_dev), "cudaSetDevice");
  ncclUniqueId id;
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  int rc = MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm);
  REMORA_CHECK(rc == MPI_SUCCESS, "dist: " << where() << ": MPI_Bcast of the ncclUniqueId failed");
  check_nccl(ncclCommInitRank(&g_comm, world, id, rank), "ncclCommInitRank");
}

void plugin_teardown() {
  if (!g_comm) return;
  ncclCommDestroy(g_comm);
  g_comm = nullptr;
}

void plugin_all_reduce(void* data, size_t count, bool f64) {
  REMORA_CHECK(g_comm, "dist: " << where() << ": NCCL is not set up");
  check_nccl(ncclAllReduce(data, data, count, f64 ? ncclDouble : ncclFloat, ncclSum, g_comm, backend_stream()),
             "ncclAllReduce");
}

void plugin_broadcast(void* data, int64_t nbytes, int root) {
  REMORA_CHECK(g_comm, "dist: " << where() << ": NCCL is not set up");
  check_nccl(ncclBroadcast(data, data, size_t(nbytes), ncclUint8, root, g_comm, backend_stream()),
             "ncclBroadcast");
}

void plugin_wait() {
  cudaError_t rc = cudaStreamSynchronize(backend_stream());
  if (rc != cudaSuccess) check_cuda(rc, "cudaStreamSynchronize (NCCL collective)");
  if (g_comm) {
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(g_comm, &async), "ncclCommGetAsyncError");
    check_nccl(async, "NCCL collective");
  }
}

bool plugin_query() {
  cudaError_t rc = cudaStreamQuery(backend_stream());
  if (rc == cudaErrorNotReady) return false;
  check_cuda(rc, "cudaStreamQuery (NCCL collective)");
  return true;
}

}  // namespace
}  // namespace detail
}  // namespace dist
}  // namespace remora

extern "C" __attribute__((visibility("default"))) const remora::dist::detail::NcclApi* remora_nccl_api() {
  using namespace remora::dist::detail;
  static const NcclApi api{plugin_usable, plugin_setup, plugin_teardown, plugin_all_reduce,
                           plugin_broadcast, plugin_wait, plugin_query};
  return &api;
}
