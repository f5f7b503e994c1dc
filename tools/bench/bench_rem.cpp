// SPDX-License-Identifier: BSD-3-Clause
// remora_bench_rem: REM / RSA benchmarks (float32, CPU).
//
//   (a) rsa: fused rsa_attention forward + backward of sum(out * probe) at
//       B=8, H=8, D=64, L in {256, 1024}, causal (-inf above the diagonal),
//       4 REM heads (regular 2, cyclic 1 pair), one gate mu per REM head.
//   sgemm: f32 matmul n = 1024, the roofline that tools/bench/bench_rem.py prints
//       (a)'s fraction of.
//   (b) rem: rem_apply (the O(L) scan) against the dense form
//       matmul(rem_matrix(...), v), forward only and forward + backward, at
//       B=1, Hr=4, D=64, masked, L in {512, ..., 8192}: time and peak memory.
//
// Every configuration runs in a forked child process: the child sets the
// thread count, builds its inputs, reads getrusage(RUSAGE_SELF).ru_maxrss just
// before the first call of the op (the baseline) and right after it (the peak),
// then times `reps` calls after `warmup` calls and reports the median. The
// parent never computes anything, so no thread pool (Remora's or OpenBLAS's) crosses a
// fork and every child starts from the same small resident set.
//
//   remora_bench_rem [--threads N] [--quick] [--json] [--only rsa|sgemm|rem]
//   remora_bench_rem --check IN.safetensors OUT.safetensors [--threads N]
//
// --check runs rsa_attention (and rem_apply) on inputs written by
// tools/bench/bench_rem.py and saves outputs and gradients for comparison with the
// PyTorch reference (tools/torch_ref/rem.py).

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <remora/remora.h>
#include <remora/core/parallel.h>

#include "bench_child.h"

using namespace remora;

namespace {

using remora_bench::in_child;
using remora_bench::Result;

struct Options {
  int threads = 2;
  bool quick = false;
  bool json = false;
  std::string only;  // "", "rsa", "sgemm" or "rem"
  int64_t rsa_L = 0;  // --rsa-L: one sequence length for (a) instead of 256 and 1024
};

RemSpec bench_spec() {
  RemSpec s;
  s.regular = 2;
  s.cyclic = 1;  // 2 heads: cos, sin
  s.masked = true;
  return s;
}

// eta [2], nu [1], theta [1], mu [4] at the paper's initial values.
struct RemParams {
  Tensor eta, nu, theta, mu;
};
RemParams bench_params(bool grad) {
  RemParams p;
  p.eta = Tensor::from_vector(std::vector<double>{1.5, -1.2});
  p.nu = Tensor::from_vector(std::vector<double>{1.5});
  p.theta = Tensor::from_vector(std::vector<double>{M_PI / 4});
  p.mu = Tensor::from_vector(std::vector<double>{-1.0, 0.5, 2.0, -2.5});
  if (grad)
    for (Tensor* t : {&p.eta, &p.nu, &p.theta, &p.mu}) t->requires_grad_();
  return p;
}

Tensor causal_mask(int64_t L) {
  // 0 on and below the diagonal, -inf above it.
  Tensor m = Tensor::zeros({L, L});
  float* d = m.data_ptr<float>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = i + 1; j < L; ++j) d[i * L + j] = -std::numeric_limits<float>::infinity();
  return m;
}

// ---- output ----

struct Row {
  std::string bench, impl, mode;
  int64_t B, H, L, D;
  Result r;
};

void print_rows(const std::vector<Row>& rows, const Options& o) {
  if (o.json) {
    std::printf("{\"threads\": %d, \"quick\": %s, \"results\": [\n", o.threads,
                o.quick ? "true" : "false");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& w = rows[i];
      std::printf(
          "  {\"bench\": \"%s\", \"impl\": \"%s\", \"mode\": \"%s\", \"B\": %lld, \"H\": %lld, "
          "\"L\": %lld, \"D\": %lld, \"ok\": %s, \"median_ms\": %.4f, \"min_ms\": %.4f, "
          "\"reps\": %d, \"peak_mib\": %.2f}%s\n",
          w.bench.c_str(), w.impl.c_str(), w.mode.c_str(), (long long)w.B, (long long)w.H,
          (long long)w.L, (long long)w.D, w.r.ok ? "true" : "false", w.r.median_ms, w.r.min_ms,
          w.r.reps, w.r.peak_mib, i + 1 < rows.size() ? "," : "");
    }
    std::printf("]}\n");
    return;
  }
  std::printf("%-5s %-26s %-8s %3s %3s %6s %3s %12s %12s %5s %10s\n", "bench", "impl", "mode", "B",
              "H", "L", "D", "median ms", "min ms", "reps", "peak MiB");
  for (const Row& w : rows)
    std::printf("%-5s %-26s %-8s %3lld %3lld %6lld %3lld %12.3f %12.3f %5d %10.1f%s\n",
                w.bench.c_str(), w.impl.c_str(), w.mode.c_str(), (long long)w.B, (long long)w.H,
                (long long)w.L, (long long)w.D, w.r.median_ms, w.r.min_ms, w.r.reps, w.r.peak_mib,
                w.r.ok ? "" : "  FAILED");
}

// ---- (a) RSA attention forward + backward ----

void bench_rsa(const Options& o, std::vector<Row>& rows) {
  const int64_t B = o.quick ? 2 : 8, H = 8, D = 64;
  std::vector<int64_t> Ls = o.quick ? std::vector<int64_t>{64} : std::vector<int64_t>{256, 1024};
  if (o.rsa_L > 0) Ls = {o.rsa_L};
  for (int64_t L : Ls) {
    auto setup = [=]() -> std::function<void()> {
      auto q = Tensor::randn({B, H, L, D}).requires_grad_();
      auto k = Tensor::randn({B, H, L, D}).requires_grad_();
      auto v = Tensor::randn({B, H, L, D}).requires_grad_();
      auto probe = Tensor::randn({B, H, L, D});
      auto mask = causal_mask(L);
      RemParams p = bench_params(true);
      const RemSpec spec = bench_spec();
      return [=]() {
        for (Tensor t : {q, k, v, p.eta, p.nu, p.theta, p.mu}) t.zero_grad();
        Tensor out = rsa_attention(q, k, v, spec, p.eta, p.nu, p.theta, p.mu, mask);
        sum(mul(out, probe)).backward();
      };
    };
    const int warm = L >= 1024 ? 1 : 2;
    rows.push_back({"rsa", "remora rsa_attention", "fwd+bwd", B, H, L, D,
                    in_child(o.threads, setup, warm, o.quick ? 2 : 5, o.quick ? 2 : 15, 3.0)});
  }
}

// The roofline of (a): the machine's f32 gemm at n = 1024, both Remora's
// matmul (Remora's own AVX-512 tiles where the CPU has them, else one
// cblas_sgemm call) and raw cblas_sgemm, each in its own child at the same
// thread count (cblas_sgemm then runs single-threaded: Remora keeps OpenBLAS
// on one thread and splits the product over its pool, so the raw call is
// split the same way here). tools/bench/bench_rem.py takes the faster as the roofline.
void bench_sgemm(const Options& o, std::vector<Row>& rows) {
  const int64_t n = o.quick ? 256 : 1024;
  auto setup = [=]() -> std::function<void()> {
    auto a = Tensor::randn({n, n});
    auto b = Tensor::randn({n, n});
    return [=]() {
      NoGradGuard ng;
      Tensor c = matmul(a, b);
    };
  };
  rows.push_back({"sgemm", "remora matmul", "fwd", 1, 1, n, n,
                  in_child(o.threads, setup, 2, o.quick ? 2 : 5, o.quick ? 2 : 21, 1.0)});
  auto blas = [=]() -> std::function<void()> {
    auto a = std::make_shared<std::vector<float>>(size_t(n * n), 0.5f);
    auto b = std::make_shared<std::vector<float>>(size_t(n * n), 0.25f);
    auto c = std::make_shared<std::vector<float>>(size_t(n * n));
    return [=]() {
      const int nt = get_num_threads();
      parallel_team(nt, [&](int t, int k) {  // row panels, one per thread, as Remora's gemm
        const int64_t lo = n * t / k, hi = n * (t + 1) / k;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(hi - lo), int(n), int(n), 1.f,
                    a->data() + lo * n, int(n), b->data(), int(n), 0.f, c->data() + lo * n, int(n));
      });
    };
  };
  rows.push_back({"sgemm_blas", "cblas_sgemm (OpenBLAS)", "fwd", 1, 1, n, n,
                  in_child(o.threads, blas, 2, o.quick ? 2 : 5, o.quick ? 2 : 21, 1.0)});
}

// ---- (b) rem_apply (scan) against rem_matrix + matmul (dense) ----

void bench_rem(const Options& o, std::vector<Row>& rows) {
  const int64_t B = 1, Hr = 4, D = 64;
  const std::vector<int64_t> Ls = o.quick ? std::vector<int64_t>{256, 512}
                                          : std::vector<int64_t>{512, 1024, 2048, 4096, 8192};
  for (int64_t L : Ls) {
    for (int dense = 0; dense < 2; ++dense) {
      for (int backward = 0; backward < 2; ++backward) {
        auto setup = [=]() -> std::function<void()> {
          auto v = Tensor::randn({B, Hr, L, D});
          if (backward) v.requires_grad_();
          auto probe = Tensor::randn({B, Hr, L, D});
          RemParams p = bench_params(backward);
          const RemSpec spec = bench_spec();
          return [=]() {
            for (Tensor t : {v, p.eta, p.nu, p.theta}) t.zero_grad();
            auto run = [&]() {
              return dense ? matmul(rem_matrix(spec, p.eta, p.nu, p.theta, L, L), v)
                           : rem_apply(spec, p.eta, p.nu, p.theta, v, L);
            };
            if (backward) {
              sum(mul(run(), probe)).backward();
            } else {
              NoGradGuard ng;
              Tensor y = run();
            }
          };
        };
        const bool big = dense && L >= 4096;
        rows.push_back({"rem", dense ? "dense rem_matrix+matmul" : "scan rem_apply",
                        backward ? "fwd+bwd" : "fwd", B, Hr, L, D,
                        in_child(o.threads, setup, big ? 1 : 2, o.quick ? 2 : 3,
                                 o.quick ? 2 : 21, 2.0)});
      }
    }
  }
}

// ---- --check: outputs and gradients for the PyTorch comparison ----

int run_check(const std::string& in, const std::string& out, int threads) {
  set_num_threads(threads);
  Safetensors st = load_safetensors(in);
  // spec = [regular, cyclic, dilated_regular, dilated_cyclic, masked, max_distance, dilations...]
  const std::vector<int64_t> sv = st.get("spec").to_i64_vector();
  REMORA_CHECK(sv.size() >= 6, "--check: 'spec' needs at least 6 entries, got " << sv.size());
  RemSpec spec;
  spec.regular = sv[0];
  spec.cyclic = sv[1];
  spec.dilated_regular = sv[2];
  spec.dilated_cyclic = sv[3];
  spec.masked = sv[4] != 0;
  spec.max_distance = sv[5];
  spec.dilations.assign(sv.begin() + 6, sv.end());
  auto leaf = [&](const char* name) { return st.get(name).clone().requires_grad_(); };
  auto opt = [&](const char* name) { return st.contains(name) ? leaf(name) : Tensor(); };
  Tensor q = leaf("q"), k = leaf("k"), v = leaf("v"), mu = leaf("mu");
  Tensor eta = opt("eta"), nu = opt("nu"), theta = opt("theta");
  Tensor probe = st.get("probe");
  Tensor mask = st.contains("attn_mask") ? st.get("attn_mask") : Tensor();
  Tensor kp = st.contains("key_padding") ? st.get("key_padding") : Tensor();
  Tensor out_t = rsa_attention(q, k, v, spec, eta, nu, theta, mu, mask, kp);
  sum(mul(out_t, probe)).backward();
  std::vector<std::pair<std::string, Tensor>> res{{"out", out_t.detach()},
                                                   {"dq", q.grad()},
                                                   {"dk", k.grad()},
                                                   {"dv", v.grad()},
                                                   {"dmu", mu.grad()}};
  if (eta.defined()) res.push_back({"deta", eta.grad()});
  if (nu.defined()) res.push_back({"dnu", nu.grad()});
  if (theta.defined()) res.push_back({"dtheta", theta.grad()});
  {
    NoGradGuard ng;  // the scan alone, P v for the REM heads
    Tensor vr = v.detach().slice(1, 0, spec.num_heads()).contiguous();
    res.push_back({"rem_y", rem_apply(spec, eta, nu, theta, vr, q.size(2), kp)});
  }
  save_safetensors(out, res);
  std::printf("wrote %s (%zu tensors)\n", out.c_str(), res.size());
  return 0;
}

void usage() {
  std::printf(
      "usage: remora_bench_rem [--threads N] [--quick] [--json] [--only rsa|sgemm|rem] [--rsa-L L]\n"
      "       remora_bench_rem --check IN.safetensors OUT.safetensors [--threads N]\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string check_in, check_out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&](int n) {
      if (i + n >= argc) {
        usage();
        std::exit(2);
      }
    };
    if (a == "--threads") {
      need(1);
      o.threads = std::atoi(argv[++i]);
      if (o.threads < 1) {
        std::fprintf(stderr, "--threads must be >= 1\n");
        return 2;
      }
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--only") {
      need(1);
      o.only = argv[++i];
    } else if (a == "--rsa-L") {
      need(1);
      o.rsa_L = std::atoll(argv[++i]);
      if (o.rsa_L < 1) {
        std::fprintf(stderr, "--rsa-L must be >= 1\n");
        return 2;
      }
    } else if (a == "--check") {
      need(2);
      check_in = argv[++i];
      check_out = argv[++i];
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument: %s\n", a.c_str());
      usage();
      return 2;
    }
  }
  try {
    if (!check_in.empty()) return run_check(check_in, check_out, o.threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remora_bench_rem --check: %s\n", e.what());
    return 1;
  }
  if (!o.only.empty() && o.only != "rsa" && o.only != "sgemm" && o.only != "rem") {
    std::fprintf(stderr, "--only: expected rsa, sgemm or rem, got '%s'\n", o.only.c_str());
    return 2;
  }
  std::vector<Row> rows;
  if (o.only.empty() || o.only == "rsa") bench_rsa(o, rows);
  if (o.only.empty() || o.only == "rsa" || o.only == "sgemm") bench_sgemm(o, rows);
  if (o.only.empty() || o.only == "rem") bench_rem(o, rows);
  print_rows(rows, o);
  for (const Row& w : rows)
    if (!w.r.ok) return 1;
  return 0;
}
