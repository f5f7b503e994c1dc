// MPI for remora::dist, as the plugin libremora_mpi.so beside libremora_dist.so
// (dist_internal.h: MpiApi). dist.cpp loads it when init() finds a launcher,
// so a plain process never maps OpenMPI and its dependencies (about 1 MiB
// resident). Everything here is internal to the plugin but remora_mpi_api.
//
// The run's communicator is a private duplicate of MPI_COMM_WORLD with
// MPI_ERRORS_RETURN: every failure comes back as an Error naming the rank
// (check below), never as MPI's silent abort. Non-blocking collectives put
// their requests on a list that dist.cpp tests or waits on (it owns the
// timeout policy); counts above INT_MAX are split into several calls.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "../core/error.h"
#include "dist.h"
#include "dist_internal.h"

namespace remora {
namespace dist {
namespace detail {

namespace {

std::string error_string(int rc) {
  char msg[MPI_MAX_ERROR_STRING + 1] = {0};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) return "unknown MPI error";
  return std::string(msg, size_t(std::max(0, len)));
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  REMORA_FAIL("dist: " << where() << ": " << what << " failed: " << error_string(rc)
                       << " (MPI error " << rc << "; another rank may have died)");
}

MPI_Comm& comm_of(const MpiWorld& w) { return *static_cast<MPI_Comm*>(w.comm); }

MPI_Datatype type_of(DType dt) {
  switch (dt) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    default: return MPI_INT64_T;
  }
}

using Requests = std::vector<MPI_Request>;
Requests& reqs_of(void* r) { return *static_cast<Requests*>(r); }

// f(pointer, count) over chunks of at most INT_MAX elements (MPI counts are int).
template <typename F>
void for_chunks(void* data, int64_t n, DType dt, F f) {
  const int64_t es = int64_t(dtype_size(dt));
  for (int64_t off = 0; off < n; off += INT_MAX)
    f(static_cast<char*>(data) + off * es, int(std::min<int64_t>(n - off, INT_MAX)));
}

void init(int* argc, char*** argv, MpiWorld* w) {
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    REMORA_CHECK(rc == MPI_SUCCESS, "dist: MPI_Init_thread failed (error " << rc << ")");
    w->we_started = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto* comm = new MPI_Comm(MPI_COMM_NULL);
  w->comm = comm;
  check(MPI_Comm_dup(MPI_COMM_WORLD, comm), "MPI_Comm_dup");
  check(MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_rank(*comm, &w->rank), "MPI_Comm_rank");
  check(MPI_Comm_size(*comm, &w->world), "MPI_Comm_size");
  MPI_Comm local = MPI_COMM_NULL;
  check(MPI_Comm_split_type(*comm, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL, &local),
        "MPI_Comm_split_type");
  MPI_Comm_rank(local, &w->local_rank);
  MPI_Comm_size(local, &w->local_size);
  MPI_Comm_free(&local);
}

void finalize(MpiWorld* w) {
  if (w->comm) {
    MPI_Comm& c = comm_of(*w);
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    delete &c;
    w->comm = nullptr;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (w->we_started && !finalized) MPI_Finalize();
}

void abort_job(const MpiWorld* w, int code) {
  MPI_Abort(w && w->comm && comm_of(*w) != MPI_COMM_NULL ? comm_of(*w) : MPI_COMM_WORLD, code);
}

int min_int(const MpiWorld& w, int v) {
  int all = 0;
  check(MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, comm_of(w)), "MPI_Allreduce");
  return all;
}

void* new_requests() { return new Requests(); }
void free_requests(void* r) { delete static_cast<Requests*>(r); }

void iallreduce_sum(const MpiWorld& w, void* data, int64_t n, DType dt, void* reqs) {
  for_chunks(data, n, dt, [&](void* p, int c) {
    MPI_Request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, p, c, type_of(dt), MPI_SUM, comm_of(w), &r),
          "MPI_Iallreduce");
    reqs_of(reqs).push_back(r);
  });
}

void ibcast(const MpiWorld& w, void* data, int64_t n, DType dt, int root, void* reqs) {
  for_chunks(data, n, dt, [&](void* p, int c) {
    MPI_Request r;
    check(MPI_Ibcast(p, c, type_of(dt), root, comm_of(w), &r), "MPI_Ibcast");
    reqs_of(reqs).push_back(r);
  });
}

void ibarrier(const MpiWorld& w, void* reqs) {
  MPI_Request r;
  check(MPI_Ibarrier(comm_of(w), &r), "MPI_Ibarrier");
  reqs_of(reqs).push_back(r);
}

void iallgather_u64(const MpiWorld& w, const uint64_t* value, uint64_t* out, void* reqs) {
  MPI_Request r;
  check(MPI_Iallgather(value, 1, MPI_UINT64_T, out, 1, MPI_UINT64_T, comm_of(w), &r),
        "MPI_Iallgather");
  reqs_of(reqs).push_back(r);
}

bool test(void* reqs, const char* what) {
  Requests& rs = reqs_of(reqs);
  if (rs.empty()) return true;
  int flag = 0;
  check(MPI_Testall(int(rs.size()), rs.data(), &flag, MPI_STATUSES_IGNORE), what);
  if (flag) rs.clear();
  return flag != 0;
}

void wait(void* reqs, const char* what) {
  Requests& rs = reqs_of(reqs);
  if (rs.empty()) return;
  check(MPI_Waitall(int(rs.size()), rs.data(), MPI_STATUSES_IGNORE), what);
  rs.clear();
}

}  // namespace
}  // namespace detail
}  // namespace dist
}  // namespace remora

extern "C" __attribute__((visibility("default"))) const remora::dist::detail::MpiApi* remora_mpi_api() {
  using namespace remora::dist::detail;
  static const MpiApi api{error_string, init,      finalize,       abort_job, min_int,
                          new_requests, free_requests, iallreduce_sum, ibcast,   ibarrier,
                          iallgather_u64, test,    wait};
  return &api;
}
