// SPDX-License-Identifier: BSD-3-Clause
// remora_bench_cuda: RSA attention on the GPU, forward and forward + backward.
//
// Section "rsa" (as before):
//   B=8, H=16, D=64, L in {1024, 2048, 4096}, causal (-inf above the diagonal),
//   4 REM heads (regular 2, cyclic 1 pair), one gate mu per REM head, float32;
//   the loss is sum(out * probe). Two paths: "fused" (rsa_attention, which takes
//   the FlashAttention-style CUDA kernel; TF32 as the environment says) and
//   "composed" (rsa_attention_reference: scores, softmax, dense P, matmuls,
//   all on the CUDA backend).
// Section "flash" (the tensor-core kernels against the reference kernel):
//   B=8, H=8 (4 of them REM heads, as above), D in {64, 128}, the same L and
//   causal mask; fused RSA attention with TF32 on ("flash": the wmma TF32
//   FlashAttention-2 kernels of backends/cuda/cuda_flash.cu) and with TF32 off
//   ("reference": the FP32 kernels of cuda_attention.cu). Besides ms it prints
//   achieved TFLOP/s, counting only the attention products, by the convention
//   4 B H L^2 D / 2 FLOPs for a causal forward (two L x L x D matmuls, half of
//   them skipped) and 2.5 times that for forward + backward (FlashAttention's
//   papers count backward alone as 2.5x, i.e. 3.5x for forward + backward;
//   our fwd+bwd TFLOP/s are therefore conservative by 3.5/2.5), and "tc": the
//   tensor-core launches that the row made (0 on a reference row; a flash row
//   with 0 fell back and its numbers are the reference kernel's).
//
// Each timing is the median of `reps` calls after `warmup` calls; a call ends
// with a device -> host copy of one element, which waits for the GPU (all work
// runs on the default stream). tools/bench/bench_cuda.py runs this beside PyTorch.
//
//   remora_bench_cuda [--quick] [--json] [--L 1024,2048] [--B 8] [--H 16] [--D 64]
//                     [--reps 10] [--paths fused,composed] [--sections rsa,flash]
//                     [--flash-B 8] [--flash-H 8] [--flash-D 64,128]
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
#include "../../backends/kernels.h"

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

std::vector<std::string> parse_words(const char* s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(x);
  return v;
}

bool has(const std::vector<std::string>& v, const char* x) {
  return std::find(v.begin(), v.end(), std::string(x)) != v.end();
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
  std::vector<std::string> sections{"rsa", "flash"};
  int64_t fB = 8, fH = 8;
  std::vector<int64_t> fDs{64, 128};
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
    else if (a == "--paths") paths = parse_words(next());
    else if (a == "--sections") sections = parse_words(next());
    else if (a == "--flash-B") fB = std::stoll(next());
    else if (a == "--flash-H") fH = std::stoll(next());
    else if (a == "--flash-D") fDs = parse_list(next());
    else {
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
    fB = 2;
    fH = 4;
    reps = 2;
  }
  const Device dev = Device::cuda();
  RemSpec spec;
  spec.regular = 2;
  spec.cyclic = 1;
  spec.masked = true;
  const int64_t Hr = spec.num_heads();
  const RsaKernels& rk = kernels<RsaKernels>(dev);
  auto tc_launches = [&]() -> int64_t { return rk.tensor_core_launches ? rk.tensor_core_launches() : 0; };
  const bool tf32_env = cuda_tf32();

  // Times one path at one shape: {fwd ms, fwd+bwd ms, tensor-core launches}; -1 on failure.
  struct Timing {
    double f_ms = -1, fb_ms = -1;
    int64_t tc = 0;
  };
  auto time_path = [&](int64_t B, int64_t H, int64_t D, int64_t L, const std::string& path) {
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
    const bool composed = path == "composed";
    // flash: TF32 on (the tensor-core kernels); reference: TF32 off (the FP32
    // kernels); fused / composed: TF32 as the environment set it.
    set_cuda_tf32(path == "flash" ? true : path == "reference" ? false : tf32_env);
    auto forward = [&] {
      return composed ? rsa_attention_reference(q, k, v, spec, eta, nu, th, mu, mask)
                      : rsa_attention(q, k, v, spec, eta, nu, th, mu, mask);
    };
    Timing t;
    const int64_t tc0 = tc_launches();
    try {
      t.f_ms = median_ms(
          [&] {
            NoGradGuard ng;
            Tensor out = forward();
            (void)out.at({0, 0, 0, 0});  // waits for the GPU
          },
          1, reps);
      t.fb_ms = median_ms(
          [&] {
            for (Tensor* x : leaves) x->zero_grad();
            Tensor loss = sum(mul(forward(), probe));
            loss.backward();
            (void)q.grad().at({0, 0, 0, 0});
          },
          1, reps);
    } catch (const Error& e) {  // e.g. out of memory for the composed path at large L
      std::fprintf(stderr, "L=%lld D=%lld %s: %s\n", (long long)L, (long long)D, path.c_str(), e.what());
    }
    t.tc = tc_launches() - tc0;
    set_cuda_tf32(tf32_env);
    return t;
  };

  if (has(sections, "rsa")) {
    if (!json)
      std::printf("RSA attention fwd+bwd on %s, f32, B=%lld H=%lld (REM heads %lld) D=%lld, causal, "
                  "TF32 %s\n%8s %10s %12s %14s\n",
                  backend(dev).name(), (long long)B, (long long)H, (long long)Hr, (long long)D,
                  tf32_env ? "on" : "off", "L", "path", "fwd ms", "fwd+bwd ms");
    for (int64_t L : Ls)
      for (const std::string& path : paths) {
        const Timing t = time_path(B, H, D, L, path);
        if (json)
          std::printf("{\"bench\": \"rsa_cuda\", \"L\": %lld, \"B\": %lld, \"H\": %lld, \"D\": %lld, "
                      "\"path\": \"%s\", \"fwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f}\n",
                      (long long)L, (long long)B, (long long)H, (long long)D, path.c_str(), t.f_ms,
                      t.fb_ms);
        else
          std::printf("%8lld %10s %12.3f %14.3f\n", (long long)L, path.c_str(), t.f_ms, t.fb_ms);
        std::fflush(stdout);
      }
  }
  if (has(sections, "flash")) {
    if (!json)
      std::printf("\nFused RSA attention, tensor cores (flash: TF32 on) vs the FP32 reference kernel, on %s, "
                  "f32, B=%lld H=%lld (REM heads %lld), causal; TFLOP/s count 4BHL^2D/2 forward, 2.5x that "
                  "fwd+bwd\n%6s %5s %10s %10s %11s %10s %12s %4s\n",
                  backend(dev).name(), (long long)fB, (long long)fH, (long long)Hr, "L", "D", "path",
                  "fwd ms", "fwd TFLOP/s", "fwd+bwd ms", "f+b TFLOP/s", "tc");
    for (int64_t Df : fDs)
      for (int64_t L : Ls)
        for (const std::string path : {"flash", "reference"}) {
          const Timing t = time_path(fB, fH, Df, L, path);
          const double fwd_flop = 4.0 * double(fB) * double(fH) * double(L) * double(L) * double(Df) / 2;
          const double f_tf = t.f_ms > 0 ? fwd_flop / (t.f_ms * 1e-3) / 1e12 : -1;
          const double fb_tf = t.fb_ms > 0 ? 2.5 * fwd_flop / (t.fb_ms * 1e-3) / 1e12 : -1;
          if (json)
            std::printf("{\"bench\": \"rsa_flash\", \"L\": %lld, \"B\": %lld, \"H\": %lld, \"D\": %lld, "
                        "\"path\": \"%s\", \"fwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f, \"fwd_tflops\": %.3f, "
                        "\"fwd_bwd_tflops\": %.3f, \"tensor_core_launches\": %lld}\n",
                        (long long)L, (long long)fB, (long long)fH, (long long)Df, path.c_str(), t.f_ms,
                        t.fb_ms, f_tf, fb_tf, (long long)t.tc);
          else
            std::printf("%6lld %5lld %10s %10.3f %11.2f %10.3f %12.2f %4lld\n", (long long)L, (long long)Df,
                        path.c_str(), t.f_ms, f_tf, t.fb_ms, fb_tf, (long long)t.tc);
          std::fflush(stdout);
        }
  }
  return 0;
}
