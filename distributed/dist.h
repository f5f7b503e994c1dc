// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora::dist — the processes of one data-parallel job, on MPI (and NCCL for
/// CUDA tensors). The design of PyTorch's torch.distributed / Horovod: one
/// process per CPU socket or GPU, launched by mpirun, collectives over tensors
/// (docs/distributed.md).
///
/// \code
///   int main(int argc, char** argv) {
///     remora::dist::init(&argc, &argv);       // world of 1 when not under mpirun
///     Tensor g = ...;
///     remora::dist::all_reduce(g, remora::dist::ReduceOp::avg);
///     remora::dist::finalize();
///   }
/// \endcode
///
/// Without a launcher (no mpirun / srun environment) init() does not touch MPI:
/// rank 0 of a world of 1, every collective is an identity, nothing needs MPI at
/// run time. A build without MPI (REMORA_MPI=OFF or no MPI found) behaves the same
/// and init() is an Error when a launcher asks for more than one rank.
///
/// Errors: every failure is a remora::Error whose message starts with
/// "dist: rank R of N:". MPI errors are returned, not fatal (MPI_ERRORS_RETURN),
/// and turned into such Errors. A rank that dies makes mpirun end the job: let an
/// Error escape main (or exit non-zero) and OpenMPI's mpirun kills the other ranks.
///
/// Collectives must be called by every rank in the same order (MPI's rule).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace remora {
namespace nn {
class Module;
}
namespace dist {

/// How all_reduce combines the ranks' tensors: their sum, or their mean
/// (avg: the sum divided by the world size).
enum class ReduceOp { sum, avg };

/// Settings of init().
struct InitOptions {
  /// Which transport CUDA tensors use: "auto" (NCCL when the build has it and
  /// every rank sees a GPU, else staged through host memory and MPI), "nccl"
  /// (required: an Error when not possible), "mpi" (never NCCL). CPU tensors
  /// always use MPI.
  std::string gpu_backend = "auto";
  /// A string every rank must agree on (a config, a command line): init()
  /// compares its hash across ranks and fails naming the ranks that differ.
  /// Empty: not checked. (The build itself is always checked.)
  std::string consistency_key;
  /// The bound on every wait: a collective that has not completed after
  /// timeout_s seconds is an Error naming the ranks that did not reach it
  /// ("rank 1 did not reach MPI_Iallreduce ..."), so a rank that is alive but
  /// stuck or stopped cannot hang the job. It also bounds the launch: when
  /// MPI_Init_thread (which waits for every rank of the job to start) has not
  /// returned after timeout_s, a watchdog thread ends this process with a
  /// message saying so (and likewise MPI_Finalize). 0 = wait forever. The
  /// environment variable REMORA_DIST_TIMEOUT (seconds) overrides it. A rank
  /// that dies needs no timeout: mpirun ends the job.
  double timeout_s = 0;
};

/// Starts the job's communication (MPI_Init_thread when launched by a launcher,
/// nothing otherwise) and checks that every rank runs the same build and the
/// same consistency_key. Idempotent: a second call returns at once.
void init(int* argc = nullptr, char*** argv = nullptr, const InitOptions& opt = {});
/// Ends it (MPI_Finalize once; idempotent). Call it on success; on failure let
/// the process exit non-zero so mpirun ends the other ranks.
void finalize();
/// Whether init() has run (and finalize() has not).
bool initialized();

/// Whether this build has MPI (REMORA_MPI).
bool mpi_built();
/// Whether this build has NCCL (REMORA_NCCL).
bool nccl_built();
/// Whether the environment says we were started by mpirun / srun / a PMI
/// launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK ...), whatever the build.
bool launched_by_mpi();
/// What init() compares across ranks as "the same build":
/// "remora 0.1.0 mpi=1 nccl=0 cuda=0 ptr=8 long=8".
std::string build_identity();
/// Whether collectives on CUDA tensors go through NCCL in this run.
bool using_nccl();

int rank();          ///< This process's rank in [0, world_size()); 0 when not initialized.
int world_size();    ///< The number of processes of the job; 1 when not initialized.
int local_rank();    ///< Rank among the processes on this machine (GPU index); 0 when not initialized.
int local_size();    ///< The number of the job's processes on this machine; 1 when not initialized.
inline bool is_main() { return rank() == 0; }  ///< Whether this is rank 0.
/// The collective timeout in seconds (0: none); settable after init.
double timeout();
/// Sets timeout() (seconds >= 0, else remora::Error; 0: wait forever).
void set_timeout(double seconds);
/// "rank 1 of 4" (for messages).
std::string where();

/// \name Collectives
/// In place; contiguous f32 / f64 tensors, i64 for sum. CPU tensors go through
/// MPI, CUDA tensors through NCCL or staged through host memory
/// (InitOptions::gpu_backend). No gradient is recorded. In a world of one each
/// is an identity.
/// @{

/// t = sum (or mean) of t over all ranks.
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum);
/// t = root's t on every rank (shape and dtype must already match).
void broadcast(Tensor& t, int root = 0);
/// Returns once every rank has called it, bounded by timeout().
void barrier();
/// A barrier with its own bound, for a wait that is expected to be long (the
/// other ranks waiting while rank 0 evaluates and writes a checkpoint). Every
/// rank calls it; it returns once all have. After timeout_s seconds (0: wait
/// forever) it is an Error naming `what` and the ranks that did not reach it:
///   dist: rank 1 of 2: barrier 'evaluation and checkpoint' did not complete
///   within 3600 s: rank 0 did not reach it (no answer within 1 s: stopped,
///   stuck or busy outside remora::dist)
void barrier(double timeout_s, const std::string& what);
/// The other ranks wait (at most timeout_s) until rank `root` has done `what`
/// and reaches this call too; `root` itself, which is expected to arrive last,
/// waits for them at most timeout() (the collective bound). Every rank calls
/// it: barrier(rank() == root ? timeout() : timeout_s, what). For "the other
/// ranks wait while rank 0 evaluates and writes the checkpoint":
///   dist::wait_for_rank(0, eval_timeout_s, "evaluation and checkpoint");
void wait_for_rank(int root, double timeout_s, const std::string& what);
/// Every rank's value, indexed by rank.
std::vector<uint64_t> all_gather(uint64_t value);
/// @}

/// A started collective; wait() blocks until it is done (and then applies the
/// averaging of ReduceOp::avg). Destroying an unfinished Work waits for it.
class Work {
 public:
  Work();  ///< No collective: not pending, wait() returns at once.
  ~Work();  ///< Waits for an unfinished collective (not after a timed-out wait).
  /// Takes over the other Work's collective; the other is left without one.
  Work(Work&&) noexcept;
  /// Waits for this Work's own unfinished collective, then takes over the other's.
  Work& operator=(Work&&) noexcept;
  /// Blocks until the collective is done, bounded by timeout() (an Error naming
  /// the ranks that did not reach it); then the tensor holds the result.
  void wait();
  /// Non-blocking progress check; true when done (then wait() returns at once).
  bool test();
  bool pending() const;  ///< Whether a collective was started and is not finished.
  struct State;  ///< The started collective's internals.

 private:
  explicit Work(std::unique_ptr<State> s);
  void wait_done();
  std::unique_ptr<State> s_;
  friend Work all_reduce_async(Tensor t, ReduceOp op);
};
/// Starts an all-reduce of t in place (MPI_Iallreduce / ncclAllReduce); t must
/// stay alive and untouched until wait().
Work all_reduce_async(Tensor t, ReduceOp op = ReduceOp::sum);

/// \name Agreement checks
/// Collective; cheap: one all-gather of 8 bytes. The hashes themselves are local.
/// @{

/// 64-bit hash of the tensors' values, shapes and dtypes (FNV-1a over bytes).
uint64_t hash_tensors(const std::vector<Tensor>& ts);
/// 64-bit FNV-1a hash of the string's bytes (local, not collective).
uint64_t hash_string(const std::string& s);
/// An Error on every rank when `value` differs between ranks; the message
/// names `what` and groups the ranks by value ("ranks 0,2 have ..., rank 1 has ...").
void check_same(const std::string& what, uint64_t value);
/// Parameters and buffers (values, shapes, dtypes, in state order) identical on every rank.
void check_same_parameters(const nn::Module& m, const std::string& what = "parameters");
/// Parameter names, shapes and dtypes identical on every rank (not values).
void check_same_structure(const nn::Module& m);
/// @}

/// How long a rank whose wait timed out waits for the other ranks to say where
/// they are before it names the ones that did not answer: min(5, max(1,
/// timeout / 10)) seconds. A timed-out wait therefore ends after at most
/// timeout + grace_seconds(timeout).
double grace_seconds(double timeout_s);

/// Fault injection for tests (REMORA_TEST_FAULT="RANK:POINT:ACTION", read once;
/// nothing happens when it is unset). When this process is rank RANK (the
/// launcher's numbering) first reaches POINT, it does ACTION: "stall" (sleeps,
/// alive, forever), "stop" (SIGSTOP to itself), "exit" (exit code 3) or
/// "kill" (SIGKILL to itself). remora::dist's own points: "init" (before
/// MPI_Init_thread: a rank that never starts), "barrier" (entering any
/// barrier) and the `what` of barrier(timeout_s, what). A program may add its
/// own points; POINT matches a name it equals or begins.
void fault_point(const std::string& name);

/// Ends the whole job at once (MPI_Abort; std::exit without MPI). For a rank
/// that must stop while others may be blocked in a collective.
[[noreturn]] void abort(int code, const std::string& why);

}  // namespace dist
}  // namespace remora
