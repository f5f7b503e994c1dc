// SPDX-License-Identifier: BSD-3-Clause
// remora::dist collectives and agreement checks. Every test runs on every rank
// (world of one without mpirun, two under `mpirun -np 2`): collectives come
// first, in the same order on every rank, and checks are CHECKs afterwards, so
// a failing rank does not leave the other waiting in a collective.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include <fstream>
#include <string>
#include <vector>

#include <remora/remora.h>
#include "../backends/backend.h"
#include "../distributed/dist.h"
#include "../distributed/dist_internal.h"

#ifdef REMORA_WITH_MPI
#include <mpi.h>
#endif

using namespace remora;

namespace {
int R() { return dist::rank(); }
int W() { return dist::world_size(); }
// Values rank r contributes: distinct per rank and element.
std::vector<double> contrib(int r, int n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = 0.25 * i + 100.0 * (r + 1) + 1.0 / (r + 3);
  return v;
}
}  // namespace

TEST_CASE("dist: rank and world", "[dist]") {
  CHECK(dist::initialized());
  CHECK(R() >= 0);
  CHECK(R() < W());
  CHECK(dist::local_rank() < dist::local_size());
  if (W() > 1) CHECK(dist::launched_by_mpi());
  if (!dist::launched_by_mpi()) CHECK(W() == 1);
  CHECK(dist::where() == "rank " + std::to_string(R()) + " of " + std::to_string(W()));
  // NCCL is used only where every rank has a GPU of its own (never on CI).
  if (!cuda_is_available(dist::local_rank())) CHECK_FALSE(dist::using_nccl());
}

// NCCL is a plugin (dist_internal.h) that only an MPI-launched run loads: a
// world of one keeps NCCL out of its address space (1.4 MiB resident with the
// CUDA runtime). Under mpirun the plugin is loaded by init's nccl_usable.
TEST_CASE("dist: a run not launched by mpirun never maps NCCL", "[dist]") {
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps.good());
  bool nccl = false;
  for (std::string line; std::getline(maps, line);) nccl = nccl || line.find("libnccl") != std::string::npos;
  if (!dist::launched_by_mpi()) CHECK_FALSE(nccl);
  if (dist::launched_by_mpi() && dist::nccl_built()) CHECK(nccl);
}

// NCCL on CUDA tensors (ctest dist_nccl_np1: `mpirun -np 1`, one GPU). Skips
// visibly where the run does not use NCCL (no GPU, no NCCL in the build, or no
// mpirun): tools/scripts/gpu_check.sh runs it on a GPU machine.
TEST_CASE("dist: NCCL all_reduce and broadcast of CUDA tensors", "[dist][nccl]") {
  if (!dist::using_nccl()) {
    WARN("skipped: this run does not use NCCL (nccl built " << dist::nccl_built() << ", launched by mpirun "
                                                            << dist::launched_by_mpi() << ", CUDA device "
                                                            << cuda_is_available(dist::local_rank()) << ")");
    return;
  }
  const Device dev = Device::cuda(dist::local_rank());
  for (DType dt : {DType::f32, DType::f64}) {
    for (int n : {1, 7, 100003}) {
      Tensor s = Tensor::from_vector(contrib(R(), n), {n}, dt).to(dev);
      Tensor a = s.clone();
      dist::all_reduce(s, dist::ReduceOp::sum);
      dist::all_reduce(a, dist::ReduceOp::avg);
      CHECK(s.device() == dev);
      std::vector<double> want(size_t(n), 0.0);
      for (int r = 0; r < W(); ++r) {
        std::vector<double> c = contrib(r, n);
        for (int i = 0; i < n; ++i) want[size_t(i)] += dt == DType::f32 ? double(float(c[size_t(i)])) : c[size_t(i)];
      }
      const std::vector<double> got_s = s.to_vector(), got_a = a.to_vector();
      const double tol = dt == DType::f32 ? 1e-6 : 1e-14;
      for (int i = 0; i < n; ++i) {
        CHECK(got_s[size_t(i)] == Approx(want[size_t(i)]).epsilon(tol));
        CHECK(got_a[size_t(i)] == Approx(want[size_t(i)] / W()).epsilon(tol));
      }
      Tensor b = Tensor::from_vector(contrib(R(), n), {n}, dt).to(dev);
      dist::broadcast(b, 0);
      const std::vector<double> got_b = b.to_vector(), root = contrib(0, n);
      for (int i = 0; i < n; ++i)
        CHECK(got_b[size_t(i)] == Approx(dt == DType::f32 ? double(float(root[size_t(i)])) : root[size_t(i)]).epsilon(tol));
    }
  }
}

TEST_CASE("dist: all_reduce sum and avg, f32 f64 i64", "[dist]") {
  for (DType dt : {DType::f32, DType::f64}) {
    for (int n : {1, 7, 1000}) {
      Tensor s = Tensor::from_vector(contrib(R(), n), {n}, dt);
      Tensor a = s.clone();
      dist::all_reduce(s, dist::ReduceOp::sum);
      dist::all_reduce(a, dist::ReduceOp::avg);
      // Expected, computed in double from every rank's contribution (exact for
      // these values in f64; f32 to its rounding).
      std::vector<double> want(size_t(n), 0.0);
      for (int r = 0; r < W(); ++r) {
        std::vector<double> c = contrib(r, n);
        for (int i = 0; i < n; ++i) want[size_t(i)] += dt == DType::f32 ? double(float(c[size_t(i)])) : c[size_t(i)];
      }
      std::vector<double> got_s = s.to_vector(), got_a = a.to_vector();
      double tol = dt == DType::f32 ? 1e-6 : 1e-14;
      for (int i = 0; i < n; ++i) {
        CHECK(got_s[size_t(i)] == Approx(want[size_t(i)]).epsilon(tol));
        CHECK(got_a[size_t(i)] == Approx(want[size_t(i)] / W()).epsilon(tol));
      }
    }
  }
  // A 2-D tensor keeps its shape; i64 sums exactly.
  Tensor m = Tensor::full({3, 4}, R() + 1, DType::f32);
  dist::all_reduce(m);
  CHECK(m.shape() == Shape{3, 4});
  CHECK(m.to_vector() == std::vector<double>(12, W() * (W() + 1) / 2.0));
  Tensor i = Tensor::from_vector(std::vector<int64_t>{int64_t(1) << 40, R()}, {2});
  dist::all_reduce(i);
  CHECK(i.to_i64_vector() == std::vector<int64_t>{W() * (int64_t(1) << 40), W() * (W() - 1) / 2});
}

TEST_CASE("dist: all_reduce_async overlaps several in flight", "[dist]") {
  std::vector<Tensor> ts;
  std::vector<dist::Work> works;
  for (int k = 0; k < 5; ++k) {
    ts.push_back(Tensor::full({100 + k}, double(R() + k), DType::f64));
    works.push_back(dist::all_reduce_async(ts.back(), k % 2 ? dist::ReduceOp::avg : dist::ReduceOp::sum));
  }
  for (int k = 4; k >= 0; --k) works[size_t(k)].wait();  // any order of waits
  for (int k = 0; k < 5; ++k) {
    double sum = 0;
    for (int r = 0; r < W(); ++r) sum += r + k;
    double want = k % 2 ? sum / W() : sum;
    CHECK_FALSE(works[size_t(k)].pending());
    CHECK(works[size_t(k)].test());
    CHECK(ts[size_t(k)].to_vector() == std::vector<double>(size_t(100 + k), want));
  }
}

TEST_CASE("dist: broadcast, barrier, all_gather", "[dist]") {
  for (int root = 0; root < W(); ++root) {
    Tensor t = Tensor::from_vector(contrib(R(), 33), {3, 11}, DType::f32);
    dist::broadcast(t, root);
    Tensor want = Tensor::from_vector(contrib(root, 33), {3, 11}, DType::f32);
    CHECK(t.to_vector() == want.to_vector());
  }
  dist::barrier();
  std::vector<uint64_t> g = dist::all_gather(uint64_t(1000 + R()));
  REQUIRE(int(g.size()) == W());
  for (int r = 0; r < W(); ++r) CHECK(g[size_t(r)] == uint64_t(1000 + r));
}

TEST_CASE("dist: bad arguments are Errors naming the rank", "[dist]") {
  Tensor nc = Tensor::ones({4, 3}).t();
  CHECK_THROWS_WITH(dist::all_reduce(nc), Catch::Contains("not contiguous") && Catch::Contains(dist::where()));
  Tensor i = Tensor::ones({2}, DType::i64);
  CHECK_THROWS_WITH(dist::all_reduce(i, dist::ReduceOp::avg), Catch::Contains("avg needs a floating tensor"));
  Tensor t = Tensor::ones({2});
  CHECK_THROWS_WITH(dist::broadcast(t, W()), Catch::Contains("is not a rank"));
  Tensor undef;
  CHECK_THROWS_WITH(dist::broadcast(undef, 0), Catch::Contains("undefined"));
  dist::InitOptions bad;
  bad.gpu_backend = "gloo";
  dist::init(nullptr, nullptr, bad);  // already initialized: returns at once
  CHECK(dist::initialized());
}

TEST_CASE("dist: collective timeout", "[dist]") {
  double before = dist::timeout();
  CHECK(before >= 0);
  dist::set_timeout(30);
  CHECK(dist::timeout() == 30);
  Tensor t = Tensor::full({64}, 1.0, DType::f64);
  dist::all_reduce(t);  // completes well within the timeout (the polling path)
  dist::barrier();
  CHECK(dist::all_gather(uint64_t(R()))[0] == 0);
  CHECK(t.to_vector() == std::vector<double>(64, double(W())));
  CHECK_THROWS_WITH(dist::set_timeout(-1), Catch::Contains("must be >= 0"));
  dist::set_timeout(before);
}

TEST_CASE("dist: a barrier with its own bound", "[dist]") {
  CHECK(dist::grace_seconds(4) == 1);
  CHECK(dist::grace_seconds(30) == 3);
  CHECK(dist::grace_seconds(3600) == 5);
  CHECK_THROWS_WITH(dist::barrier(-1, "evaluation"), Catch::Contains("timeout_s must be >= 0"));
  dist::fault_point("evaluation");  // REMORA_TEST_FAULT unset: nothing happens
  dist::barrier(30, "evaluation and checkpoint");
  // Rank 0 arrives late, as after an evaluation: the others wait (sleeping
  // between polls) and go on once it has arrived.
  if (R() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  dist::barrier(30, "evaluation and checkpoint");
  if (W() > 1 && R() != 0) CHECK(std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(200));
  dist::barrier(0, "no bound");
  if (R() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  dist::wait_for_rank(0, 30, "evaluation and checkpoint");
  CHECK_THROWS_WITH(dist::wait_for_rank(W(), 30, "x"), Catch::Contains("is not a rank"));
}

TEST_CASE("dist: a timed-out barrier names the rank that did not reach it", "[dist]") {
  if (W() == 1) return;
  // Rank 1 arrives 3 s late; rank 0 gives up after 0.5 s, asks where rank 1
  // is (no answer within the 1 s grace: it is sleeping) and names it. Rank
  // 1's barrier then completes against rank 0's abandoned one, so both have
  // called the same collectives afterwards.
  if (R() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    dist::barrier(30, "late");
  } else {
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(dist::barrier(0.5, "late"),
                      Catch::Contains("dist: rank 0 of " + std::to_string(W()) + ": barrier 'late' (collective ") &&
                          Catch::Contains("did not complete within 0.5 s: rank 1 did not reach it (no answer"));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(s >= 1.5);  // 0.5 s, then the 1 s grace
    CHECK(s < 2.8);
  }
  dist::barrier(30, "after");
  Tensor t = Tensor::full({8}, 1.0, DType::f64);
  dist::all_reduce(t);
  CHECK(t.to_vector() == std::vector<double>(8, double(W())));
}

TEST_CASE("dist: hashes", "[dist]") {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor b = a.clone();
  CHECK(dist::hash_tensors({a}) == dist::hash_tensors({b}));
  CHECK(dist::hash_tensors({a}) != dist::hash_tensors({a.reshape({1, 3})}));  // shape counts
  CHECK(dist::hash_tensors({a}) != dist::hash_tensors({a.to(DType::f64)}));   // dtype counts
  b.data_ptr<float>()[2] = std::nextafter(3.0f, 4.0f);                        // one ulp
  CHECK(dist::hash_tensors({a}) != dist::hash_tensors({b}));
  CHECK(dist::hash_string("a") != dist::hash_string("b"));
  Tensor m = Tensor::randn({2, 3});
  CHECK(dist::hash_tensors({m.t()}) == dist::hash_tensors({m.t().contiguous()}));  // values in logical order
}

TEST_CASE("dist: check_same names the ranks that differ", "[dist]") {
  CHECK_NOTHROW(dist::check_same("configurations", dist::hash_string("same everywhere")));
  std::string mine = R() == 1 ? "lr=0.1" : "lr=0.01";
  if (W() == 1) {
    CHECK_NOTHROW(dist::check_same("configurations", dist::hash_string(mine)));
  } else {
    // Every rank gets the Error, and it names rank 1 as the odd one out.
    CHECK_THROWS_WITH(dist::check_same("configurations", dist::hash_string(mine)),
                      Catch::Contains("configurations differ between ranks") &&
                          Catch::Contains("rank 1 has hash") &&
                          Catch::Contains("differing from rank 0: rank 1") &&
                          Catch::Contains(dist::where()));
  }
}

#ifdef REMORA_WITH_MPI
TEST_CASE("dist: MPI errors are returned and become Errors naming the rank", "[dist]") {
  if (W() == 1) return;  // MPI is not even initialized in a world of one
  // MPI_ERRORS_RETURN is set on MPI_COMM_WORLD: an invalid count returns an
  // error code instead of aborting the job.
  int buf = 0;
  int rc = MPI_Bcast(&buf, -1, MPI_INT, 0, MPI_COMM_WORLD);
  CHECK(rc != MPI_SUCCESS);
  CHECK_THROWS_WITH(dist::detail::check_mpi_result(rc, "MPI_Bcast"),
                    Catch::Contains("dist: " + dist::where() + ": MPI_Bcast failed") &&
                        Catch::Contains("another rank may have died"));
  CHECK_NOTHROW(dist::detail::check_mpi_result(MPI_SUCCESS, "MPI_Bcast"));
}
#endif
