// SPDX-License-Identifier: BSD-3-Clause
// Between dist.cpp and its two plugins (not a public API). MPI (mpi.cpp,
// libremora_mpi.so) and NCCL (nccl.cpp, libremora_nccl.so) each live in a
// plugin beside libremora_dist.so that dist.cpp loads (dlopen) only in a run
// started by a launcher, so a plain process maps neither OpenMPI (about
// 1 MiB resident) nor NCCL and the CUDA runtime (1.4 MiB). Each plugin hands
// its functions over as one table (remora_mpi_api, remora_nccl_api).
//
// NCCL: the communicator of this run, bootstrapped through MPI. All calls
// work on the CUDA backend's stream (Backend::native_stream() of this rank's
// device), so they are ordered with its kernels. dist.cpp loads the NCCL
// plugin the first time an MPI-launched run asks nccl_usable.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/dtype.h"

namespace remora {
namespace dist {
namespace detail {

/// rc of an MPI call (MPI_SUCCESS or an error code, as MPI_ERRORS_RETURN hands
/// it back) -> nothing or an Error "dist: rank R of N: <what> failed: <MPI's text>".
void check_mpi_result(int rc, const char* what);

/// The run's MPI world as the plugin set it up.
struct MpiWorld {
  void* comm = nullptr;  // the plugin's MPI_Comm* (a private duplicate of MPI_COMM_WORLD)
  int rank = 0, world = 1, local_rank = 0, local_size = 1;
  bool we_started = false;  // the plugin called MPI_Init (so finalize calls MPI_Finalize)
};
/// The MPI plugin's functions. Failures are Errors naming the rank. The
/// non-blocking collectives add their requests to a list made by
/// new_requests; test (true once all are done) and wait finish them.
struct MpiApi {
  std::string (*error_string)(int rc);
  void (*init)(int* argc, char*** argv, MpiWorld* w);
  void (*finalize)(MpiWorld* w);
  void (*abort)(const MpiWorld* w, int code);
  int (*min_int)(const MpiWorld& w, int v);  // blocking all-reduce, MPI_MIN
  void* (*new_requests)();
  void (*free_requests)(void* reqs);
  void (*iallreduce_sum)(const MpiWorld& w, void* data, int64_t n, DType dt, void* reqs);
  void (*ibcast)(const MpiWorld& w, void* data, int64_t n, DType dt, int root, void* reqs);
  void (*ibarrier)(const MpiWorld& w, void* reqs);
  void (*iallgather_u64)(const MpiWorld& w, const uint64_t* value, uint64_t* out, void* reqs);
  bool (*test)(void* reqs, const char* what);
  void (*wait)(void* reqs, const char* what);
  // Where is everyone? A rank polling a wait answers the queries of other
  // ranks (serve: the number of the collective it waits in). A rank whose
  // wait timed out asks every other rank (ask_start) and polls for the
  // answers (ask_poll: answers[r] = rank r's collective number, -1 while none
  // came; true once all did). Point-to-point on the run's communicator, tags
  // of their own, so they never match a collective's messages.
  void (*serve)(const MpiWorld& w, int64_t waiting_in);
  void* (*ask_start)(const MpiWorld& w);
  bool (*ask_poll)(void* ask, int64_t* answers);
};

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
