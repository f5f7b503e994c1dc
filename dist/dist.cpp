// remora::dist on MPI (REMORA_WITH_MPI) or as a world of one (dist.h).
// MPI itself is the plugin libremora_mpi.so (mpi.cpp), loaded only when a
// launcher started the run. CUDA tensors go through NCCL (nccl.cpp, also a
// plugin) when the run uses it, otherwise they are staged through host memory
// and reduced by MPI.
#include "dist.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

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

// Polls done() until it is true; with a timeout, an Error once it has passed
// (a peer that is alive but stuck would otherwise block this rank forever).
template <typename Done>
void wait_until(Done done, const char* what) {
  if (g.timeout_s <= 0) {
    while (!done()) std::this_thread::yield();
    return;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(g.timeout_s);
  while (!done()) {
    REMORA_CHECK(std::chrono::steady_clock::now() < deadline,
                 "dist: " << where() << ": " << what << " did not complete within " << g.timeout_s
                          << " s (timeout_s / REMORA_DIST_TIMEOUT): another rank is stuck, dead "
                             "or not calling the same collectives");
    std::this_thread::yield();
  }
}

#ifdef REMORA_WITH_MPI
// MPI_Waitall, or polling with MPI_Testall under a timeout.
void wait_all(Requests& reqs, const char* what) {
  if (g.timeout_s <= 0) {
    reqs.wait(what);
    return;
  }
  wait_until([&] { return reqs.test(what); }, what);
}
#endif

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
                   << " ranks; install OpenMPI (tools/setup.sh) and rebuild, or run without mpirun");
  g = Global{};
  g.inited = true;
  g.timeout_s = timeout;
#else
  // Errors come back as return codes (turned into Errors), never as a silent abort.
  g.mpi = true;  // from here on finalize() hands the world back to the plugin
  mpi().init(argc, argv, &g.mw);
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
    const int all = mpi().min_int(g.mw, can);
    if (opt.gpu_backend == "nccl")
      REMORA_CHECK(all == 1, "dist: " << where() << ": gpu_backend nccl was asked for but "
                                      << (can ? "another rank cannot use it"
                                              : "this rank cannot use it: " + why));
    if (all == 1) {
      detail::nccl_setup(g.mw.comm, g.rank, g.world, g.local_rank);
      g.nccl = true;
    }
  } catch (...) {
    finalize();
    throw;
  }
#endif
}

void finalize() {
  if (!g.inited) return;
#ifdef REMORA_WITH_MPI
  if (g.nccl) detail::nccl_teardown();
  if (g.mpi) mpi().finalize(&g.mw);
#endif
  g = Global{};
}

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
#ifdef REMORA_WITH_MPI
  Requests reqs;
#endif
};

Work::Work() = default;
Work::Work(std::unique_ptr<State> s) : s_(std::move(s)) {}
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&& o) noexcept {
  if (this != &o) {
    if (pending()) try { wait(); } catch (...) {}
    s_ = std::move(o.s_);
  }
  return *this;
}
Work::~Work() {
  if (pending()) try { wait(); } catch (...) {}
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
  if (s_->nccl) {
    if (g.timeout_s > 0) wait_until([] { return detail::nccl_query(); }, "ncclAllReduce");
    detail::nccl_wait();
  } else {
    wait_all(s_->reqs, "MPI_Iallreduce");
  }
#endif
  finish(*s_);
}

Work all_reduce_async(Tensor t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  REMORA_CHECK(op == ReduceOp::sum || is_floating(t.dtype()),
               "dist: " << where() << ": all_reduce: avg needs a floating tensor, got " << t.str());
  auto s = std::make_unique<Work::State>();
  s->t = t;
  s->op = op;
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
  if (g.world == 1) return;
#ifdef REMORA_WITH_MPI
  if (t.device().is_cuda() && g.nccl) {
    detail::nccl_broadcast(t.raw_data(), t.numel() * int64_t(dtype_size(t.dtype())), root);
    if (g.timeout_s > 0) wait_until([] { return detail::nccl_query(); }, "ncclBroadcast");
    detail::nccl_wait();
    return;
  }
  Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu()).contiguous();
  Requests reqs;
  mpi().ibcast(g.mw, host.raw_data(), host.numel(), host.dtype(), root, reqs.get());
  wait_all(reqs, "MPI_Ibcast");
  if (!t.device().is_cpu()) {
    NoGradGuard ng;
    t.copy_(host);
  }
#endif
}

void barrier() {
  if (g.world == 1) return;
#ifdef REMORA_WITH_MPI
  Requests reqs;
  mpi().ibarrier(g.mw, reqs.get());
  wait_all(reqs, "MPI_Ibarrier");
#endif
}

std::vector<uint64_t> all_gather(uint64_t value) {
  std::vector<uint64_t> out(size_t(g.world), value);
  if (g.world == 1) return out;
#ifdef REMORA_WITH_MPI
  Requests reqs;
  mpi().iallgather_u64(g.mw, &value, out.data(), reqs.get());
  wait_all(reqs, "MPI_Iallgather");
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
