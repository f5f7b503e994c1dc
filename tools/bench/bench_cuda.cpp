// remora_bench_cuda: RSA attention on the GPU, forward and forward + backward.
//
//   B=8, H=16, D=64, L in {1024, 2048, 4096}, causal (-inf above the diagonal),
//   4 REM heads (regular 2, cyclic 1 pair), one gate mu per REM head, float32;
//   the loss is sum(out * probe). Two paths: "fused" (rsa_attention, which takes
//   the FlashAttention-style CUDA kernel) and "composed" (rsa_attention_reference:
//   scores, softmax, dense P, matmuls, all on the CUDA backend).
//
// Each timing is the median of `reps` calls after `warmup` calls; a call ends
// with a device -> host copy of one element, which waits for the GPU (all work
// runs on the default stream). tools/bench_cuda.py runs this beside PyTorch.
//
//   remora_bench_cuda [--quick] [--json] [--L 1024,2048] [--B 8] [--H 16] [--D 64]
//                     [--reps 10] [--paths fused,composed]
//
// Without a usable GPU it prints why and exits with 77 (a skip for ctest).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "../../backends/backend.h"

using namespace remora;

namespace {

double now_s() {
  using clk = std::chrono::steady_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(std::stoll(x));
  return v;
}

double median_ms(const std::function<void()>& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double a = now_s();
    f();
    t.push_back((now_s() - a) * 1e3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, json = false;
  std::vector<int64_t> Ls{1024, 2048, 4096};
  int64_t B = 8, H = 16, D = 64;
  int reps = 10;
  std::vector<std::string> paths{"fused", "composed"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") quick = true;
    else if (a == "--json") json = true;
    else if (a == "--L") Ls = parse_list(next());
    else if (a == "--B") B = std::stoll(next());
    else if (a == "--H") H = std::stoll(next());
    else if (a == "--D") D = std::stoll(next());
    else if (a == "--reps") reps = std::atoi(next());
    else if (a == "--paths") {
      paths.clear();
      std::stringstream ss(next());
      std::string p;
      while (std::getline(ss, p, ',')) paths.push_back(p);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::string why;
  if (!cuda_is_available(0, &why)) {
    std::printf("remora_bench_cuda: skipped: %s\n", why.c_str());
    return 77;
  }
  if (quick) {
    Ls = {128};
    B = 2;
    H = 4;
    reps = 2;
  }
  const Device dev = Device::cuda();
  RemSpec spec;
  spec.regular = 2;
  spec.cyclic = 1;
  spec.masked = true;
  const int64_t Hr = spec.num_heads();
  if (!json)
    std::printf("RSA attention fwd+bwd on %s, f32, B=%lld H=%lld (REM heads %lld) D=%lld, causal, "
                "TF32 %s\n%8s %10s %12s %14s\n",
                backend(dev).name(), (long long)B, (long long)H, (long long)Hr, (long long)D,
                cuda_tf32() ? "on" : "off", "L", "path", "fwd ms", "fwd+bwd ms");
  for (int64_t L : Ls) {
    Generator g(1234);
    Tensor q = Tensor::randn({B, H, L, D}, DType::f32, dev, &g).requires_grad_();
    Tensor k = Tensor::randn({B, H, L, D}, DType::f32, dev, &g).requires_grad_();
    Tensor v = Tensor::randn({B, H, L, D}, DType::f32, dev, &g).requires_grad_();
    Tensor probe = Tensor::randn({B, H, L, D}, DType::f32, dev, &g);
    Tensor eta = Tensor::from_vector(std::vector<double>{1.2, -1.5}, {2}, DType::f32, dev).requires_grad_();
    Tensor nu = Tensor::from_vector(std::vector<double>{1.4}, {1}, DType::f32, dev).requires_grad_();
    Tensor th = Tensor::from_vector(std::vector<double>{0.785}, {1}, DType::f32, dev).requires_grad_();
    Tensor mu = Tensor::from_vector(std::vector<double>{-1.0, 0.5, 0.0, 1.0}, {Hr}, DType::f32, dev)
                    .requires_grad_();
    Tensor blocked = triu(Tensor::ones({L, L}, DType::i64, dev), 1);
    Tensor mask = masked_fill(Tensor::zeros({L, L}, DType::f32, dev), blocked,
                              -std::numeric_limits<double>::infinity());
    const std::vector<Tensor*> leaves{&q, &k, &v, &eta, &nu, &th, &mu};
    for (const std::string& path : paths) {
      const bool fused = path == "fused";
      auto forward = [&] {
        return fused ? rsa_attention(q, k, v, spec, eta, nu, th, mu, mask)
                     : rsa_attention_reference(q, k, v, spec, eta, nu, th, mu, mask);
      };
      double f_ms = -1, fb_ms = -1;
      try {
        f_ms = median_ms(
            [&] {
              NoGradGuard ng;
              Tensor out = forward();
              (void)out.at({0, 0, 0, 0});  // waits for the GPU
            },
            1, reps);
        fb_ms = median_ms(
            [&] {
              for (Tensor* t : leaves) t->zero_grad();
              Tensor loss = sum(mul(forward(), probe));
              loss.backward();
              (void)q.grad().at({0, 0, 0, 0});
            },
            1, reps);
      } catch (const Error& e) {  // e.g. out of memory for the composed path at large L
        std::fprintf(stderr, "L=%lld %s: %s\n", (long long)L, path.c_str(), e.what());
      }
      if (json)
        std::printf("{\"bench\": \"rsa_cuda\", \"L\": %lld, \"B\": %lld, \"H\": %lld, \"D\": %lld, "
                    "\"path\": \"%s\", \"fwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f}\n",
                    (long long)L, (long long)B, (long long)H, (long long)D, path.c_str(), f_ms,
                    fb_ms);
      else
        std::printf("%8lld %10s %12.3f %14.3f\n", (long long)L, path.c_str(), f_ms, fb_ms);
      std::fflush(stdout);
    }
  }
  return 0;
}
