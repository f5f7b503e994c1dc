// SPDX-License-Identifier: BSD-3-Clause
// remora::dist on MPI (REMORA_WITH_MPI) or as a world of one (dist.h).
// MPI itself is the plugin libremora_mpi.so (mpi.cpp), loaded only when a
// launcher started the run. CUDA tensors go through NCCL (nccl.cpp, also a
// plugin) when the run uses it, otherwise they are staged through host memory
// and reduced by MPI.
#include "dist.h"

#include <dlfcn.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "../core/autograd.h"
#include "../core/error.h"
#include "../core/tensor_impl.h"
#include "../backends/backend.h"
#include "../nn/module.h"
#include "dist_internal.h"

namespace remora {
namespace dist {

namespace {

struct Global {
  bool inited = false;
  bool mpi = false;             // collectives go through MPI (world > 1 or launched)
  bool nccl = false;
  double timeout_s = 0;  // 0: collectives wait forever
  int rank = 0, world = 1, local_rank = 0, local_size = 1;
  int64_t seq = 0;  // collectives started so far (the same count on every rank)
  bool timed_out = false;  // a wait has timed out: unfinished Works are dropped, not waited for again
  detail::MpiWorld mw;  // the MPI plugin's world (g.mpi)
};
Global g;

const char* getenv_any(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n)) return v;
  return nullptr;
}

// World size the launcher announces (-1: launched but size unknown, 0: not launched).
int launcher_world_size() {
  if (const char* v = getenv_any({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                  "MV2_COMM_WORLD_SIZE"}))
    return std::max(1, std::atoi(v));
  if (getenv_any({"PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK"})) return -1;
  return 0;
}

// This process's rank as the launcher numbers it (before MPI is up); 0 without one.
int launcher_rank() {
  if (const char* v = getenv_any({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"}))
    return std::max(0, std::atoi(v));
  return 0;
}

std::string seconds_str(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// "rank 1" / "ranks 1,3"
std::string ranks_str(const std::vector<int>& rs) {
  std::string out = rs.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < rs.size(); ++i) out += (i ? "," : "") + std::to_string(rs[i]);
  return out;
}

// Ends this process from the watchdog thread when a wait that cannot be
// polled (MPI_Init_thread, MPI_Finalize, the NCCL setup) outlives its bound:
// mpirun then ends the job. Armed by the main thread around such a call. The
// state is never destroyed (the thread outlives static destructors).
class Watchdog {
 public:
  void arm(const std::string& what, const std::string& hint, double seconds, const std::string& who) {
    if (seconds <= 0) return;
    std::lock_guard<std::mutex> lk(m_);
    what_ = what;
    hint_ = hint;
    who_ = who;
    seconds_ = seconds;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    armed_ = true;
    ++generation_;
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lk(m_);
    armed_ = false;
    ++generation_;
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return armed_; });
      const uint64_t gen = generation_;
      const auto deadline = deadline_;
      if (cv_.wait_until(lk, deadline, [&] { return generation_ != gen; })) continue;
      std::string msg = "dist: " + who_ + ": " + what_ + " did not complete within " + seconds_str(seconds_) +
                        " s (timeout_s / REMORA_DIST_TIMEOUT): " + hint_ +
                        "; ending this process (exit code 1) so that the launcher ends the job\n";
      // write(2): no locks, no allocation after this point.
      ssize_t ignored = ::write(STDERR_FILENO, msg.data(), msg.size());
      (void)ignored;
      std::_Exit(1);
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::string what_, hint_, who_;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false, started_ = false;
  uint64_t generation_ = 0;
};
Watchdog& watchdog() {
  static Watchdog* w = new Watchdog;
  return *w;
}

// REMORA_TEST_FAULT="RANK:POINT:ACTION" (dist.h: fault_point).
struct Fault {
  int rank = -1;
  std::string point, action;
};
const Fault& fault() {
  static const Fault f = [] {
    Fault f;
    const char* v = std::getenv("REMORA_TEST_FAULT");
    if (!v || !*v) return f;
    std::string s = v;
    const size_t a = s.find(':'), b = s.rfind(':');
    std::string action = b == std::string::npos ? "" : s.substr(b + 1);
    if (a == std::string::npos || a == b ||
        !(action == "stall" || action == "stop" || action == "exit" || action == "kill")) {
      std::cerr << "dist: REMORA_TEST_FAULT='" << s << "' is not RANK:POINT:(stall|stop|exit|kill); ignored\n";
      return f;
    }
    f.rank = std::atoi(s.substr(0, a).c_str());
    f.point = s.substr(a + 1, b - a - 1);
    f.action = action;
    return f;
  }();
  return f;
}


void check_tensor(const Tensor& t, const char* op) {
  REMORA_CHECK(t.defined(), "dist: " << where() << ": " << op << ": the tensor is undefined");
  REMORA_CHECK(t.is_contiguous(), "dist: " << where() << ": " << op << ": " << t.str()
                                           << " is not contiguous (collectives work in place on "
                                              "contiguous tensors; pass t.contiguous())");
}

#ifdef REMORA_WITH_MPI
// The MPI plugin, loaded on first use (init, under a launcher). RTLD_GLOBAL:
// OpenMPI's own components, which libmpi loads in turn, resolve its symbols
// globally.
const detail::MpiApi& mpi() {
  static std::once_flag once;
  static const detail::MpiApi* api = nullptr;
  static std::string error;
  std::call_once(once, [] {
    const std::string path =
        library_dir(reinterpret_cast<const void*>(&mpi_built)) + "libremora_mpi.so";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    auto get = h ? reinterpret_cast<const detail::MpiApi* (*)()>(dlsym(h, "remora_mpi_api")) : nullptr;
    if (get) {
      api = get();
    } else {
      const char* e = dlerror();
      error = "the MPI plugin " + path + " could not be loaded: " + (e ? e : "unknown error");
    }
  });
  REMORA_CHECK(api, "dist: " << where() << ": " << error);
  return *api;
}

// A list of outstanding MPI requests (the plugin's), made on first use.
class Requests {
 public:
  Requests() = default;
  Requests(const Requests&) = delete;
  Requests& operator=(const Requests&) = delete;
  ~Requests() {
    if (p_) mpi().free_requests(p_);
  }
  void* get() {
    if (!p_) p_ = mpi().new_requests();
    return p_;
  }
  bool test(const char* what) { return !p_ || mpi().test(p_, what); }
  void wait(const char* what) {
    if (p_) mpi().wait(p_, what);
  }

 private:
  void* p_ = nullptr;
};
#endif

#ifdef REMORA_WITH_MPI
// Where the other ranks are, from their answers to an ask (answers[r]: the
// collective rank r waits in, -1 for no answer) against collective `seq`:
// "rank 0 did not reach it (...); rank 2 waits in it too".
std::string whereabouts(const std::vector<int64_t>& answers, int64_t seq, double grace) {
  std::vector<int> missing, same, before, after;
  for (int r = 0; r < g.world; ++r) {
    if (r == g.rank) continue;
    const int64_t a = answers[size_t(r)];
    if (a < 0) missing.push_back(r);
    else if (a == seq) same.push_back(r);
    else if (a < seq) before.push_back(r);
    else after.push_back(r);
  }
  std::vector<std::string> parts;
  if (!missing.empty())
    parts.push_back(ranks_str(missing) + " did not reach it (no answer within " + seconds_str(grace) +
                    " s: stopped, stuck, or busy outside remora::dist)");
  if (!before.empty())
    parts.push_back(ranks_str(before) + (before.size() == 1 ? " waits" : " wait") +
                    " in an earlier collective (the ranks did not call the same collectives)");
  if (!after.empty())
    parts.push_back(ranks_str(after) + (after.size() == 1 ? " is" : " are") + " already past it");
  if (!same.empty())
    parts.push_back(ranks_str(same) + (same.size() == 1 ? " waits" : " wait") + " in it too");
  if (missing.empty() && before.empty() && after.empty())
    parts.push_back("every rank waits in it (the transport did not complete it)");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}
#endif

// The notices of a long wait: after notice_after(timeout_s), and then at
// doubling intervals, one line on stderr says what this rank waits in, for how
// long so far and at most, and for which rank: `awaited` when the caller knows
// it (wait_for_rank), else the answers of the other ranks to an ask.
class WaitNotices {
 public:
  using clock = std::chrono::steady_clock;
  WaitNotices(const std::string& what, int64_t seq, double timeout_s, int awaited)
      : what_(what), seq_(seq), timeout_s_(timeout_s), awaited_(awaited), start_(clock::now()),
        next_(start_ + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(notice_after(timeout_s)))) {}

  // The first notice: a quarter of the bound, between 1 and 30 s (30 s when unbounded).
  static double notice_after(double timeout_s) {
    return timeout_s > 0 ? std::min(30.0, std::max(1.0, timeout_s / 4)) : 30.0;
  }

  void poll() {
    const auto now = clock::now();
    if (now < next_ || g.world == 1) return;
#ifdef REMORA_WITH_MPI
    if (awaited_ < 0 && g.mpi) {
      if (!ask_) {
        ask_ = mpi().ask_start(g.mw);
        answers_.assign(size_t(g.world), -1);
        asked_ = now;
      }
      const double grace = grace_seconds(timeout_s_ > 0 ? timeout_s_ : 10);
      if (!mpi().ask_poll(ask_, answers_.data()) && now - asked_ < std::chrono::duration<double>(grace)) return;
      ask_ = nullptr;  // the plugin keeps it (its sends may still be in flight)
      say(now, whereabouts(answers_, seq_, grace));
      return;
    }
#endif
    say(now, awaited_ >= 0 ? "for rank " + std::to_string(awaited_) : "for the other ranks");
  }

 private:
  void say(clock::time_point now, const std::string& who) {
    const double waited = std::chrono::duration<double>(now - start_).count();
    std::ostringstream os;
    os << "dist: " << where() << ": waiting " << std::fixed << std::setprecision(1) << waited << " s";
    if (timeout_s_ > 0) os << " (at most " << seconds_str(timeout_s_) << " s)";
    os << " in " << what_ << ": " << who << "\n";
    std::fputs(os.str().c_str(), stderr);
    std::fflush(stderr);
    next_ = start_ + 2 * (now - start_);
  }

  std::string what_;
  int64_t seq_;
  double timeout_s_;
  int awaited_;
  clock::time_point start_, next_;
#ifdef REMORA_WITH_MPI
  void* ask_ = nullptr;
  clock::time_point asked_;
  std::vector<int64_t> answers_;
#endif
};

// Polls done() until it is true, with notices (WaitNotices) while it takes
// long. With a timeout, once it has passed, this rank asks every other rank
// where it is (ranks polling a wait answer with the number of the collective
// they wait in) and, after at most grace_seconds, throws an Error naming the
// ranks that did not reach collective `seq`. A long wait (a barrier while
// rank 0 evaluates) sleeps between polls so that it leaves the CPU to the
// ranks at work. `awaited`: the rank this wait is for, when one is (-1: any).
template <typename Done>
void wait_until(Done done, const std::string& what, int64_t seq, double timeout_s, const char* bound,
                bool long_wait = false, int awaited = -1) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  WaitNotices notices(what, seq, timeout_s, awaited);
  auto pause = [&] {
    notices.poll();
    if (long_wait && clock::now() - start > std::chrono::milliseconds(10))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    else
      std::this_thread::yield();
  };
  if (timeout_s <= 0) {
    while (!done()) {
#ifdef REMORA_WITH_MPI
      if (g.mpi) mpi().serve(g.mw, seq);
#endif
      pause();
    }
    return;
  }
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (done()) return;
#ifdef REMORA_WITH_MPI
    if (g.mpi) mpi().serve(g.mw, seq);
#endif
    if (clock::now() >= deadline) break;
    pause();
  }
  std::ostringstream os;
  os << "dist: " << where() << ": " << what << " did not complete within " << timeout_s << " s" << bound << ": ";
#ifdef REMORA_WITH_MPI
  if (g.mpi && g.world > 1) {
    const double grace = grace_seconds(timeout_s);
    void* ask = mpi().ask_start(g.mw);
    std::vector<int64_t> answers(size_t(g.world), -1);
    const auto grace_end = clock::now() + std::chrono::duration<double>(grace);
    for (;;) {
      if (done()) return;  // the late rank arrived after all
      mpi().serve(g.mw, seq);
      if (mpi().ask_poll(ask, answers.data()) || clock::now() >= grace_end) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    os << whereabouts(answers, seq, grace);
    g.timed_out = true;
    throw Error(os.str());
  }
#endif
  os << "another rank is stuck, dead or not calling the same collectives";
  g.timed_out = true;
  throw Error(os.str());
}

#ifdef REMORA_WITH_MPI
// MPI_Waitall, or polling with MPI_Testall under a timeout.
void wait_all(Requests& reqs, const std::string& what, int64_t seq, double timeout_s, const char* bound,
              bool long_wait = false, int awaited = -1) {
  if (timeout_s <= 0 && !long_wait) {
    reqs.wait(what.c_str());
    return;
  }
  wait_until([&] { return reqs.test(what.c_str()); }, what, seq, timeout_s, bound, long_wait, awaited);
}
#endif

constexpr const char* kBound = " (timeout_s / REMORA_DIST_TIMEOUT)";
// The number of the collective being started. A new collective also means the
// caller handled an earlier timeout: unfinished Works are waited for again.
int64_t next_seq() {
  g.timed_out = false;
  return ++g.seq;
}
void release(bool sync);  // finalize's body (below)
std::string coll(const char* op, int64_t seq) { return std::string(op) + " (collective " + std::to_string(seq) + ")"; }

}  // namespace

#if defined(REMORA_WITH_MPI) && defined(REMORA_WITH_NCCL)
namespace detail {  // NCCL is the plugin libremora_nccl.so beside this library
namespace {
std::string g_nccl_error;  // why the plugin did not load
const NcclApi* nccl_api() {
  static std::once_flag once;
  static const NcclApi* api = nullptr;
  std::call_once(once, [] {
    const std::string path =
        library_dir(reinterpret_cast<const void*>(&nccl_built)) + "libremora_nccl.so";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto get = h ? reinterpret_cast<const NcclApi* (*)()>(dlsym(h, "remora_nccl_api")) : nullptr;
    if (get) {
      api = get();
    } else {
      const char* e = dlerror();
      g_nccl_error = "the NCCL plugin " + path + " could not be loaded: " + (e ? e : "unknown error");
    }
  });
  return api;
}
const NcclApi& loaded() {
  const NcclApi* a = nccl_api();
  REMORA_CHECK(a, "dist: " << where() << ": " << g_nccl_error);
  return *a;
}
}  // namespace
bool nccl_usable(int local_rank, std::string* why) {
  if (!nccl_api()) {
    if (why) *why = g_nccl_error;
    return false;
  }
  return nccl_api()->usable(local_rank, why);
}
void nccl_setup(void* comm, int rank, int world, int local_rank) { loaded().setup(comm, rank, world, local_rank); }
void nccl_teardown() { loaded().teardown(); }
void nccl_all_reduce(void* data, size_t count, bool f64) { loaded().all_reduce(data, count, f64); }
void nccl_broadcast(void* data, int64_t nbytes, int root) { loaded().broadcast(data, nbytes, root); }
void nccl_wait() { loaded().wait(); }
bool nccl_query() { return loaded().query(); }
}  // namespace detail
#endif

#if defined(REMORA_WITH_MPI) && !defined(REMORA_WITH_NCCL)
namespace detail {  // no NCCL in this build: CUDA tensors are staged through MPI
bool nccl_usable(int, std::string* why) {
  if (why) *why = "this build has no NCCL (REMORA_NCCL)";
  return false;
}
void nccl_setup(void*, int, int, int) {}
void nccl_teardown() {}
void nccl_all_reduce(void*, size_t, bool) {}
void nccl_broadcast(void*, int64_t, int) {}
void nccl_wait() {}
bool nccl_query() { return true; }
}  // namespace detail
#endif

#ifdef REMORA_WITH_MPI
void detail::check_mpi_result(int rc, const char* what) {
  if (rc == 0) return;  // MPI_SUCCESS is 0 in every MPI
  REMORA_FAIL("dist: " << where() << ": " << what << " failed: " << mpi().error_string(rc)
                       << " (MPI error " << rc << "; another rank may have died)");
}
#endif

// ---- lifecycle ----
bool mpi_built() {
#ifdef REMORA_WITH_MPI
  return true;
#else
  return false;
#endif
}
bool nccl_built() {
#ifdef REMORA_WITH_NCCL
  return true;
#else
  return false;
#endif
}
bool launched_by_mpi() { return launcher_world_size() != 0; }

std::string build_identity() {
  std::ostringstream os;
  os << "remora " << REMORA_VERSION_STRING << " mpi=" << mpi_built() << " nccl=" << nccl_built()
#ifdef REMORA_WITH_CUDA
     << " cuda=1"
#else
     << " cuda=0"
#endif
     << " ptr=" << sizeof(void*) << " long=" << sizeof(long);
  return os.str();
}
bool initialized() { return g.inited; }
bool using_nccl() { return g.nccl; }
int rank() { return g.rank; }
int world_size() { return g.world; }
int local_rank() { return g.local_rank; }
int local_size() { return g.local_size; }
double timeout() { return g.timeout_s; }
void set_timeout(double seconds) {
  REMORA_CHECK(seconds >= 0, "dist: set_timeout: seconds must be >= 0, got " << seconds);
  g.timeout_s = seconds;
}
std::string where() { return "rank " + std::to_string(g.rank) + " of " + std::to_string(g.world); }

double grace_seconds(double timeout_s) { return std::min(5.0, std::max(1.0, timeout_s / 10)); }

void fault_point(const std::string& name) {
  const Fault& f = fault();
  if (f.rank < 0) return;
  const int me = g.inited ? g.rank : launcher_rank();
  if (me != f.rank || name.compare(0, f.point.size(), f.point) != 0) return;
  static bool fired = false;  // once per process
  if (fired) return;
  fired = true;
  std::cerr << "dist: rank " << me << ": fault injection (REMORA_TEST_FAULT): " << f.action << " at " << name
            << std::endl;
  if (f.action == "exit") std::_Exit(3);
  if (f.action == "kill") std::raise(SIGKILL);
  if (f.action == "stop") {
    std::raise(SIGSTOP);
    return;
  }
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // stall: alive, never back
}

void init(int* argc, char*** argv, const InitOptions& opt) {
  if (g.inited) return;
  REMORA_CHECK(opt.gpu_backend == "auto" || opt.gpu_backend == "nccl" || opt.gpu_backend == "mpi",
               "dist: init: gpu_backend must be auto, nccl or mpi, got '" << opt.gpu_backend
                                                                          << "'");
  REMORA_CHECK(opt.timeout_s >= 0, "dist: init: timeout_s must be >= 0, got " << opt.timeout_s);
  double timeout = opt.timeout_s;
  if (const char* t = std::getenv("REMORA_DIST_TIMEOUT")) {
    char* end = nullptr;
    timeout = std::strtod(t, &end);
    REMORA_CHECK(end != t && *end == 0 && timeout >= 0,
                 "dist: init: REMORA_DIST_TIMEOUT must be a number of seconds >= 0, got '" << t << "'");
  }
  int launched = launcher_world_size();
  if (launched == 0) {  // plain process: a world of one, no MPI at all
    g = Global{};
    g.inited = true;
    g.timeout_s = timeout;
    return;
  }
#ifndef REMORA_WITH_MPI
  (void)argc;
  (void)argv;
  REMORA_CHECK(launched == 1,
               "dist: this Remora was built without MPI (REMORA_MPI=OFF or no MPI found at "
               "configure time) but was launched by mpirun with "
                   << (launched < 0 ? std::string("several") : std::to_string(launched))
                   << " ranks; install OpenMPI (tools/scripts/setup.sh) and rebuild, or run without mpirun");
  g = Global{};
  g.inited = true;
  g.timeout_s = timeout;
#else
  // Errors come back as return codes (turned into Errors), never as a silent abort.
  const detail::MpiApi& api = mpi();
  fault_point("init");  // tests: a rank that never reaches MPI_Init_thread
  // MPI_Init_thread returns once every rank of the job has reached it: a rank
  // that never starts would block this one there for ever. The watchdog
  // bounds it (there is nothing to poll).
  const std::string launched_as = "rank " + std::to_string(launcher_rank()) + " of " +
                                  (launched > 0 ? std::to_string(launched) : std::string("?")) + " (as launched)";
  watchdog().arm("MPI_Init_thread",
                 "it returns once every rank of the job has reached it; a rank did not start, or is stuck "
                 "before it (the other ranks' output may say which)",
                 timeout, launched_as);
  g.mpi = true;  // from here on finalize() hands the world back to the plugin
  try {
    api.init(argc, argv, &g.mw);
  } catch (...) {
    watchdog().disarm();
    throw;
  }
  watchdog().disarm();
  g.rank = g.mw.rank;
  g.world = g.mw.world;
  g.local_rank = g.mw.local_rank;
  g.local_size = g.mw.local_size;
  g.inited = true;
  g.timeout_s = timeout;
  try {
    check_same("builds (" + build_identity() + " here)", hash_string(build_identity()));
    if (!opt.consistency_key.empty())
      check_same("configurations", hash_string(opt.consistency_key));
    // NCCL for CUDA tensors: every rank decides together (a communicator is collective).
    std::string why;
    int can = detail::nccl_usable(g.local_rank, &why) ? 1 : 0;
    if (opt.gpu_backend == "mpi") can = 0;
    std::vector<uint64_t> cans = all_gather(uint64_t(can));
    const int all = int(*std::min_element(cans.begin(), cans.end()));
    if (opt.gpu_backend == "nccl")
      REMORA_CHECK(all == 1, "dist: " << where() << ": gpu_backend nccl was asked for but "
                                      << (can ? "another rank cannot use it"
                                              : "this rank cannot use it: " + why));
    if (all == 1) {
      watchdog().arm("the NCCL setup (ncclCommInitRank)", "every rank must reach it", g.timeout_s, where());
      detail::nccl_setup(g.mw.comm, g.rank, g.world, g.local_rank);
      watchdog().disarm();
      g.nccl = true;
    }
  } catch (...) {
    watchdog().disarm();
    // No barrier (the ranks may have failed differently); MPI_Finalize stays bounded.
    release(false);
    throw;
  }
#endif
}

namespace {
// Hands the world back. sync: first a barrier under the timeout, so that a rank
// that never gets here is named instead of leaving the others in MPI_Finalize
// (which waits for every rank); it throws then, and the world stays up.
void release(bool sync) {
  if (!g.inited) return;
#ifdef REMORA_WITH_MPI
  if (sync && g.mpi && g.world > 1 && g.timeout_s > 0) barrier(g.timeout_s, "finalize");
  if (g.nccl) detail::nccl_teardown();
  if (g.mpi) {
    watchdog().arm("MPI_Finalize", "it returns once every rank has reached it", g.timeout_s, where());
    mpi().finalize(&g.mw);
    watchdog().disarm();
  }
#else
  (void)sync;
#endif
  g = Global{};
}
}  // namespace

void finalize() { release(true); }

[[noreturn]] void abort(int code, const std::string& why) {
  std::cerr << "dist: " << where() << ": aborting the job: " << why << std::endl;
#ifdef REMORA_WITH_MPI
  if (g.mpi) mpi().abort(&g.mw, code);
#endif
  std::exit(code);
}

// ---- collectives ----
void all_reduce(Tensor& t, ReduceOp op) { all_reduce_async(t, op).wait(); }

struct Work::State {
  Tensor t;       // the caller's tensor
  Tensor staged;  // host copy of a CUDA tensor reduced by MPI
  ReduceOp op = ReduceOp::sum;
  bool nccl = false;
  bool done = false;
  int64_t seq = 0;  // which collective (for a timeout's message)
#ifdef REMORA_WITH_MPI
  Requests reqs;
#endif
};

Work::Work() = default;
Work::Work(std::unique_ptr<State> s) : s_(std::move(s)) {}
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&& o) noexcept {
  if (this != &o) {
    if (pending() && !g.timed_out) try { wait(); } catch (...) {}
    s_ = std::move(o.s_);
  }
  return *this;
}
Work::~Work() {
  // After a timeout (this Work's or another's, the Error unwinding past it)
  // waiting again would only add another timeout before the job ends.
  if (pending() && !g.timed_out) try { wait(); } catch (...) {}
}
bool Work::pending() const { return s_ && !s_->done; }

static void finish(Work::State& s) {
  s.done = true;
  NoGradGuard ng;
  if (s.staged.defined()) s.t.copy_(s.staged);
  if (s.op == ReduceOp::avg && world_size() > 1) s.t.mul_(1.0 / world_size());
}

bool Work::test() {
  if (!pending()) return true;
#ifdef REMORA_WITH_MPI
  if (s_->nccl) {
    if (!detail::nccl_query()) return false;
  } else if (!s_->reqs.test("MPI_Testall (all-reduce)")) {
    return false;
  }
#endif
  finish(*s_);
  return true;
}

void Work::wait() {
  if (!pending()) return;
#ifdef REMORA_WITH_MPI
  try {
    wait_done();
  } catch (...) {
    // A wait that failed (timed out, or MPI's error) is given up: destroying
    // this Work must not wait a second time.
    s_->done = true;
    throw;
  }
#endif
  finish(*s_);
}

void Work::wait_done() {
#ifdef REMORA_WITH_MPI
  if (s_->nccl) {
    if (g.timeout_s > 0)
      wait_until([] { return detail::nccl_query(); }, coll("ncclAllReduce", s_->seq), s_->seq, g.timeout_s, kBound);
    detail::nccl_wait();
  } else {
    wait_all(s_->reqs, coll("MPI_Iallreduce", s_->seq), s_->seq, g.timeout_s, kBound);
  }
#endif
}

Work all_reduce_async(Tensor t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  REMORA_CHECK(op == ReduceOp::sum || is_floating(t.dtype()),
               "dist: " << where() << ": all_reduce: avg needs a floating tensor, got " << t.str());
  auto s = std::make_unique<Work::State>();
  s->t = t;
  s->op = op;
  s->seq = next_seq();
  if (g.world == 1) {  // a world of one: the sum and the mean are t itself
    s->done = true;
    return Work(std::move(s));
  }
#ifdef REMORA_WITH_MPI
  if (t.device().is_cuda() && g.nccl) {
    REMORA_CHECK(is_floating(t.dtype()), "dist: " << where() << ": NCCL all_reduce takes f32/f64, got " << t.str());
    detail::nccl_all_reduce(t.raw_data(), size_t(t.numel()), t.dtype() == DType::f64);
    s->nccl = true;
    return Work(std::move(s));
  }
  Tensor host = t;
  if (!t.device().is_cpu()) {
    s->staged = t.to(Device::cpu()).contiguous();
    host = s->staged;
  }
  mpi().iallreduce_sum(g.mw, host.raw_data(), host.numel(), host.dtype(), s->reqs.get());
#endif
  return Work(std::move(s));
}

void broadcast(Tensor& t, int root) {
  check_tensor(t, "broadcast");
  REMORA_CHECK(root >= 0 && root < g.world, "dist: " << where() << ": broadcast: root " << root
                                                     << " is not a rank (world size " << g.world
                                                     << ")");
  [[maybe_unused]] const int64_t seq = next_seq();
  if (g.world == 1) return;
#ifdef REMORA_WITH_MPI
  if (t.device().is_cuda() && g.nccl) {
    detail::nccl_broadcast(t.raw_data(), t.numel() * int64_t(dtype_size(t.dtype())), root);
    if (g.timeout_s > 0)
      wait_until([] { return detail::nccl_query(); }, coll("ncclBroadcast", seq), seq, g.timeout_s, kBound);
    detail::nccl_wait();
    return;
  }
  Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu()).contiguous();
  Requests reqs;
  mpi().ibcast(g.mw, host.raw_data(), host.numel(), host.dtype(), root, reqs.get());
  wait_all(reqs, coll("MPI_Ibcast", seq), seq, g.timeout_s, kBound);
  if (!t.device().is_cpu()) {
    NoGradGuard ng;
    t.copy_(host);
  }
#endif
}

void barrier() {
  [[maybe_unused]] const int64_t seq = next_seq();
  fault_point("barrier");
  if (g.world == 1) return;
#ifdef REMORA_WITH_MPI
  Requests reqs;
  mpi().ibarrier(g.mw, reqs.get());
  wait_all(reqs, coll("MPI_Ibarrier", seq), seq, g.timeout_s, kBound);
#endif
}

namespace {
// barrier(timeout_s, what), waiting for rank `awaited` (-1: for any).
void named_barrier(double timeout_s, const std::string& what, int awaited) {
  REMORA_CHECK(timeout_s >= 0, "dist: " << where() << ": barrier '" << what << "': timeout_s must be >= 0, got "
                                        << timeout_s);
  [[maybe_unused]] const int64_t seq = next_seq();
  fault_point("barrier");
  fault_point(what);
  if (g.world == 1) return;
#ifdef REMORA_WITH_MPI
  Requests reqs;
  mpi().ibarrier(g.mw, reqs.get());
  wait_all(reqs, "barrier '" + what + "' (collective " + std::to_string(seq) + ")", seq, timeout_s, "",
           /*long_wait=*/true, awaited);
#endif
}
}  // namespace

void barrier(double timeout_s, const std::string& what) { named_barrier(timeout_s, what, -1); }

void wait_for_rank(int root, double timeout_s, const std::string& what) {
  REMORA_CHECK(root >= 0 && root < g.world, "dist: " << where() << ": wait_for_rank: root " << root
                                                      << " is not a rank (world size " << g.world << ")");
  if (g.rank == root)
    named_barrier(g.timeout_s, what, -1);
  else
    named_barrier(timeout_s, what, root);
}

std::vector<uint64_t> all_gather(uint64_t value) {
  std::vector<uint64_t> out(size_t(g.world), value);
  [[maybe_unused]] const int64_t seq = next_seq();
  if (g.world == 1) return out;
#ifdef REMORA_WITH_MPI
  Requests reqs;
  mpi().iallgather_u64(g.mw, &value, out.data(), reqs.get());
  wait_all(reqs, coll("MPI_Iallgather", seq), seq, g.timeout_s, kBound);
#endif
  return out;
}

// ---- agreement checks ----
namespace {
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  template <typename T>
  void add_pod(const T& v) { add(&v, sizeof v); }
  void add_str(const std::string& s) {
    add_pod(uint64_t(s.size()));
    add(s.data(), s.size());
  }
};

void check_same_impl(const std::string& what, uint64_t value, bool decimal) {
  std::vector<uint64_t> all = all_gather(value);
  bool same = std::all_of(all.begin(), all.end(), [&](uint64_t v) { return v == all[0]; });
  if (same) return;
  std::vector<std::pair<uint64_t, std::vector<int>>> groups;  // in order of first rank
  for (int r = 0; r < int(all.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const std::pair<uint64_t, std::vector<int>>& p) { return p.first == all[size_t(r)]; });
    if (it == groups.end()) groups.push_back({all[size_t(r)], {r}});
    else it->second.push_back(r);
  }
  std::ostringstream os;
  os << "dist: " << where() << ": " << what << " differ between ranks:";
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::vector<int>& rs = groups[i].second;
    os << (i ? ";" : "") << (rs.size() == 1 ? " rank " : " ranks ");
    for (size_t k = 0; k < rs.size(); ++k) os << (k ? "," : "") << rs[k];
    os << (rs.size() == 1 ? " has " : " have ");
    if (decimal) os << groups[i].first;
    else os << "hash " << std::hex << groups[i].first << std::dec;
  }
  std::vector<int> bad;
  for (int r = 0; r < int(all.size()); ++r)
    if (all[size_t(r)] != all[0]) bad.push_back(r);
  os << " (differing from rank 0: rank" << (bad.size() > 1 ? "s " : " ");
  for (size_t k = 0; k < bad.size(); ++k) os << (k ? "," : "") << bad[k];
  os << ")";
  throw Error(os.str());
}
}  // namespace

uint64_t hash_string(const std::string& s) {
  Fnv f;
  f.add_str(s);
  return f.h;
}

uint64_t hash_tensors(const std::vector<Tensor>& ts) {
  Fnv f;
  f.add_pod(uint64_t(ts.size()));
  for (const Tensor& t : ts) {
    if (!t.defined()) {
      f.add_pod(uint8_t(0xff));
      continue;
    }
    f.add_pod(uint8_t(t.dtype()));
    f.add_pod(uint64_t(t.dim()));
    for (int64_t d : t.shape()) f.add_pod(d);
    Tensor c = t.device().is_cpu() ? t.contiguous() : t.to(Device::cpu()).contiguous();
    f.add(c.raw_data(), size_t(c.numel()) * dtype_size(c.dtype()));
  }
  return f.h;
}

void check_same(const std::string& what, uint64_t value) { check_same_impl(what, value, false); }

void check_same_structure(const nn::Module& m) {
  if (g.world == 1) return;
  check_same_impl("parameter counts", uint64_t(m.num_parameters()), true);
  Fnv f;
  auto add_named = [&](const nn::NamedTensors& ts) {
    f.add_pod(uint64_t(ts.size()));
    for (const auto& kv : ts) {
      f.add_str(kv.first);
      f.add_pod(uint8_t(kv.second.dtype()));
      for (int64_t d : kv.second.shape()) f.add_pod(d);
    }
  };
  add_named(m.named_parameters());
  add_named(m.named_buffers());
  check_same_impl("model structures (parameter and buffer names, shapes, dtypes)", f.h, false);
}

void check_same_parameters(const nn::Module& m, const std::string& what) {
  if (g.world == 1) return;
  std::vector<Tensor> ts;
  for (const auto& kv : m.named_parameters()) ts.push_back(kv.second);
  for (const auto& kv : m.named_buffers()) ts.push_back(kv.second);
  check_same(what, hash_tensors(ts));
}

}  // namespace dist
}  // namespace remora
