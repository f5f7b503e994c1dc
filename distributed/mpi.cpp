// SPDX-License-Identifier: BSD-3-Clause
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

// ---- where is everyone (dist_internal.h: serve, ask_start, ask_poll) ----
constexpr int kTagQuery = 0x5e51, kTagAnswer = 0x5e52;
struct Listener {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request query = MPI_REQUEST_NULL;  // a query from any rank, always posted
  int64_t query_buf = 0;
  struct Reply {
    int64_t value = 0;
    MPI_Request req = MPI_REQUEST_NULL;
  };
  std::vector<Reply*> replies;  // answers in flight (their buffers must live until sent)
};
Listener g_listener;

void listen(MPI_Comm c) {
  g_listener.comm = c;
  check(MPI_Irecv(&g_listener.query_buf, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagQuery, c, &g_listener.query),
        "MPI_Irecv (query)");
}

void stop_listening() {
  Listener& l = g_listener;
  if (l.query != MPI_REQUEST_NULL) {
    MPI_Cancel(&l.query);
    MPI_Wait(&l.query, MPI_STATUS_IGNORE);
  }
  for (Listener::Reply* r : l.replies) {
    if (r->req != MPI_REQUEST_NULL) MPI_Request_free(&r->req);  // completes on its own; the buffer is leaked
  }
  l = Listener{};
}

void serve(const MpiWorld& w, int64_t waiting_in) {
  Listener& l = g_listener;
  for (auto it = l.replies.begin(); it != l.replies.end();) {
    int done = 0;
    MPI_Test(&(*it)->req, &done, MPI_STATUS_IGNORE);
    if (done) {
      delete *it;
      it = l.replies.erase(it);
    } else {
      ++it;
    }
  }
  for (;;) {
    if (l.query == MPI_REQUEST_NULL) return;
    int got = 0;
    MPI_Status st;
    if (MPI_Test(&l.query, &got, &st) != MPI_SUCCESS || !got) return;
    auto* r = new Listener::Reply;
    r->value = waiting_in;
    if (MPI_Isend(&r->value, 1, MPI_INT64_T, st.MPI_SOURCE, kTagAnswer, l.comm, &r->req) == MPI_SUCCESS)
      l.replies.push_back(r);
    else
      delete r;
    if (MPI_Irecv(&l.query_buf, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagQuery, l.comm, &l.query) != MPI_SUCCESS)
      l.query = MPI_REQUEST_NULL;
  }
}

struct Ask {
  int rank = 0;
  int64_t query = 0;
  std::vector<int64_t> got;
  std::vector<MPI_Request> sends, recvs;
  std::vector<bool> answered;
};

void* ask_start(const MpiWorld& w) {
  // Never freed: the sends may still be in flight when the caller's Error
  // ends the process (their buffers must outlive them).
  auto* a = new Ask;
  a->rank = w.rank;
  a->got.assign(size_t(w.world), -1);
  a->answered.assign(size_t(w.world), false);
  a->sends.assign(size_t(w.world), MPI_REQUEST_NULL);
  a->recvs.assign(size_t(w.world), MPI_REQUEST_NULL);
  MPI_Comm c = comm_of(w);
  for (int r = 0; r < w.world; ++r) {
    if (r == w.rank) continue;
    MPI_Irecv(&a->got[size_t(r)], 1, MPI_INT64_T, r, kTagAnswer, c, &a->recvs[size_t(r)]);
    MPI_Isend(&a->query, 1, MPI_INT64_T, r, kTagQuery, c, &a->sends[size_t(r)]);
  }
  return a;
}

bool ask_poll(void* p, int64_t* answers) {
  Ask& a = *static_cast<Ask*>(p);
  bool all = true;
  for (size_t r = 0; r < a.recvs.size(); ++r) {
    if (int(r) == a.rank) {
      answers[r] = -1;
      continue;
    }
    if (!a.answered[r] && a.recvs[r] != MPI_REQUEST_NULL) {
      int done = 0;
      if (MPI_Test(&a.recvs[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) a.answered[r] = true;
    }
    if (a.sends[r] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&a.sends[r], &done, MPI_STATUS_IGNORE);
    }
    answers[r] = a.answered[r] ? a.got[r] : -1;
    all = all && a.answered[r];
  }
  return all;
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
  listen(*comm);
}

void finalize(MpiWorld* w) {
  stop_listening();
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
                          iallgather_u64, test,    wait,           serve,     ask_start,
                          ask_poll};
  return &api;
}
