// Between dist.cpp and nccl.cpp (not a public API): the NCCL communicator of
// this run, bootstrapped through MPI. All calls work on the CUDA backend's
// stream (Backend::native_stream() of this rank's device), so they are
// ordered with its kernels.
//
// nccl.cpp is a plugin, libremora_nccl.so beside libremora_dist.so: dist.cpp
// loads it (dlopen) the first time an MPI-launched run asks nccl_usable, so a
// single-process run never maps NCCL and the CUDA runtime (1.4 MiB resident).
// The plugin hands its functions over as one NcclApi (remora_nccl_api).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remora {
namespace dist {
namespace detail {

/// rc of an MPI call (MPI_SUCCESS or an error code, as MPI_ERRORS_RETURN hands
/// it back) -> nothing or an Error "dist: rank R of N: <what> failed: <MPI's text>".
void check_mpi_result(int rc, const char* what);

/// Whether this rank can use NCCL (built with it, a GPU for local_rank); *why says why not.
bool nccl_usable(int local_rank, std::string* why);
/// Collective over the MPI communicator *mpi_comm (an MPI_Comm*): rank 0 makes
/// the ncclUniqueId, MPI broadcasts it, every rank calls ncclCommInitRank on
/// GPU local_rank % device count.
void nccl_setup(void* mpi_comm, int rank, int world, int local_rank);
void nccl_teardown();
/// In-place sum over ranks, enqueued on the stream (returns before it is done).
void nccl_all_reduce(void* data, size_t count, bool f64);
void nccl_broadcast(void* data, int64_t nbytes, int root);
/// Blocks until everything enqueued is done; an Error naming the rank on failure.
void nccl_wait();
/// Non-blocking: true when everything enqueued is done.
bool nccl_query();

/// The plugin's side of the calls above (dist.cpp's nccl_* forward to it).
struct NcclApi {
  bool (*usable)(int local_rank, std::string* why);
  void (*setup)(void* mpi_comm, int rank, int world, int local_rank);
  void (*teardown)();
  void (*all_reduce)(void* data, size_t count, bool f64);
  void (*broadcast)(void* data, int64_t nbytes, int root);
  void (*wait)();
  bool (*query)();
};

}  // namespace detail
}  // namespace dist
}  // namespace remora
