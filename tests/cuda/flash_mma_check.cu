// SPDX-License-Identifier: BSD-3-Clause
// The mma.sync FlashAttention-2 forward (backends/cuda/cuda_flash_mma.cu) on a
// GPU: its output and lse against a float64 reference on the host (the same
// cases tests/flash_emu runs lane by lane in the emulator), then its speed at
// training sizes. Built with the CUDA backend; without a GPU it exits 77
// (ctest's "skipped"). tools/scripts/gpu_check.sh runs it in its `mma` stage.
//
//   flash_mma_check [--quick]      the comparisons only (--quick: no timings)
//
// Prints one line per case and one JSON line per timing:
//   {"kernel":"flash_mma_fwd","dtype":"bf16","B":8,"H":16,"L":1024,"D":64,"causal":true,"ms":...,"tflops":...}
// Exit 0 when every comparison holds, 1 when one does not.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../backends/cuda/cuda_flash_mma.cu"

namespace remora {
namespace cuda {
// The two entries of the backend that the kernel file calls, for a program of
// its own: the default stream, and an error check after each launch.
cudaStream_t stream() { return nullptr; }
void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  REMORA_CHECK(e == cudaSuccess, kernel << ": launch failed: " << cudaGetErrorString(e));
}
}  // namespace cuda
}  // namespace remora

namespace {

using remora::cuda::FlashMmaForward;

struct Case {
  const char* name;
  int64_t B, H, Lq, Lk, D;
  bool f16, causal;
  int64_t window;  // -1: none
  bool padding;    // the last keys of batch row 1 padded
};

// The operand values, rounded to the operand type (so the reference sees what the kernel sees).
float round_to(float x, bool f16) {
  return f16 ? __half2float(__float2half_rn(x)) : __bfloat162float(__float2bfloat16_rn(x));
}

std::vector<uint16_t> to_bits16(const std::vector<float>& x, bool f16) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (f16) {
      const __half h = __float2half_rn(x[i]);
      std::memcpy(&out[i], &h, 2);
    } else {
      const __nv_bfloat16 b = __float2bfloat16_rn(x[i]);
      std::memcpy(&out[i], &b, 2);
    }
  }
  return out;
}

bool visible(const Case& c, const std::vector<float>& kp, int64_t b, int64_t i, int64_t j) {
  if (c.causal) {
    const int64_t last = i + c.Lk - c.Lq;
    if (j > last) return false;
    if (c.window >= 0 && j <= last - c.window) return false;
  }
  return !(c.padding && std::isinf(kp[size_t(b * c.Lk + j)]));
}

// Runs one case: the kernel against the float64 reference. Returns whether it held.
bool run_case(const Case& c, std::mt19937& gen) {
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t nq = c.B * c.H * c.Lq * c.D, nk = c.B * c.H * c.Lk * c.D;
  std::vector<float> q(static_cast<size_t>(nq)), k(static_cast<size_t>(nk)), v(static_cast<size_t>(nk));
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = round_to(nd(gen), c.f16);
  std::vector<float> kp(size_t(c.B * c.Lk), 0.f);
  if (c.padding && c.B > 1)
    for (int64_t j = c.Lk - c.Lk / 3; j < c.Lk; ++j) kp[size_t(1 * c.Lk + j)] = -INFINITY;
  const float scale = 1.f / std::sqrt(float(c.D));

  const std::vector<uint16_t> qb = to_bits16(q, c.f16), kb = to_bits16(k, c.f16), vb = to_bits16(v, c.f16);
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float *dkp = nullptr, *dout = nullptr, *dlse = nullptr;
  REMORA_CUDA_CHECK(cudaMalloc(&dq, qb.size() * 2));
  REMORA_CUDA_CHECK(cudaMalloc(&dk, kb.size() * 2));
  REMORA_CUDA_CHECK(cudaMalloc(&dv, vb.size() * 2));
  REMORA_CUDA_CHECK(cudaMalloc(&dkp, kp.size() * 4));
  REMORA_CUDA_CHECK(cudaMalloc(&dout, size_t(nq) * 4));
  REMORA_CUDA_CHECK(cudaMalloc(&dlse, size_t(c.B * c.H * c.Lq) * 4));
  REMORA_CUDA_CHECK(cudaMemcpy(dq, qb.data(), qb.size() * 2, cudaMemcpyHostToDevice));
  REMORA_CUDA_CHECK(cudaMemcpy(dk, kb.data(), kb.size() * 2, cudaMemcpyHostToDevice));
  REMORA_CUDA_CHECK(cudaMemcpy(dv, vb.data(), vb.size() * 2, cudaMemcpyHostToDevice));
  REMORA_CUDA_CHECK(cudaMemcpy(dkp, kp.data(), kp.size() * 4, cudaMemcpyHostToDevice));
  REMORA_CUDA_CHECK(cudaMemset(dout, 0xff, size_t(nq) * 4));  // NaN: an output the kernel never wrote shows

  FlashMmaForward p;
  p.B = c.B, p.H = c.H, p.Lq = c.Lq, p.Lk = c.Lk, p.D = c.D;
  p.scale = scale;
  p.f16 = c.f16;
  p.q = dq, p.k = dk, p.v = dv;
  p.kp = c.padding ? dkp : nullptr;
  p.causal = c.causal;
  p.window = c.window;
  p.o = dout;
  p.lse = dlse;
  bool ok = remora::cuda::flash_mma_forward(p);
  if (!ok) std::printf("FAIL %s: flash_mma_forward declined the problem\n", c.name);
  REMORA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(static_cast<size_t>(nq)), lse(static_cast<size_t>(c.B * c.H * c.Lq));
  REMORA_CUDA_CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  REMORA_CUDA_CHECK(cudaMemcpy(lse.data(), dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
  for (void* ptr : {dq, dk, dv, static_cast<void*>(dkp), static_cast<void*>(dout), static_cast<void*>(dlse)})
    cudaFree(ptr);

  // The reference in float64, and the worst errors relative to the largest |O|.
  double worst_o = 0, worst_lse = 0, big = 1e-3;
  std::vector<double> s(static_cast<size_t>(c.Lk));
  std::vector<double> ref(static_cast<size_t>(c.D));
  for (int64_t b = 0; b < c.B && ok; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.Lq; ++i) {
        const float* qi = &q[size_t(((b * c.H + h) * c.Lq + i) * c.D)];
        double m = -INFINITY;
        for (int64_t j = 0; j < c.Lk; ++j) {
          s[size_t(j)] = -INFINITY;
          if (!visible(c, kp, b, i, j)) continue;
          const float* kj = &k[size_t(((b * c.H + h) * c.Lk + j) * c.D)];
          double d = 0;
          for (int64_t e = 0; e < c.D; ++e) d += double(qi[e]) * kj[e];
          s[size_t(j)] = d * scale;
          m = std::max(m, s[size_t(j)]);
        }
        std::fill(ref.begin(), ref.end(), 0.0);
        double l = 0;
        if (std::isfinite(m))
          for (int64_t j = 0; j < c.Lk; ++j) {
            if (std::isinf(s[size_t(j)])) continue;
            const double w = std::exp(s[size_t(j)] - m);
            l += w;
            const float* vj = &v[size_t(((b * c.H + h) * c.Lk + j) * c.D)];
            for (int64_t e = 0; e < c.D; ++e) ref[size_t(e)] += w * vj[e];
          }
        const size_t row = size_t((b * c.H + h) * c.Lq + i);
        const double want_lse = std::isfinite(m) ? m + std::log(l) : INFINITY;
        const double got_lse = lse[row];
        worst_lse = std::max(worst_lse, std::isinf(want_lse) ? (got_lse == want_lse ? 0.0 : INFINITY)
                                                             : std::fabs(got_lse - want_lse) / std::max(1.0, std::fabs(want_lse)));
        for (int64_t e = 0; e < c.D; ++e) {
          const double want = l > 0 ? ref[size_t(e)] / l : 0.0;
          big = std::max(big, std::fabs(want));
          const double err = std::fabs(double(out[row * size_t(c.D) + size_t(e)]) - want);
          worst_o = std::isnan(err) ? INFINITY : std::max(worst_o, err);
        }
      }
  // P is rounded to the operand type for P v: 2^-8 relative for bf16, 2^-11 for f16.
  const double tol_o = c.f16 ? 4e-3 : 2e-2;
  const bool held = ok && worst_o / big <= tol_o && worst_lse <= 1e-5;
  std::printf("%s %s (%s, B %lld H %lld Lq %lld Lk %lld D %lld): max |dO| / max |O| = %.3g (tol %.0e), lse rel %.3g\n",
              held ? "ok  " : "FAIL", c.name, c.f16 ? "f16" : "bf16", (long long)c.B, (long long)c.H,
              (long long)c.Lq, (long long)c.Lk, (long long)c.D, worst_o / big, tol_o, worst_lse);
  return held;
}

// Times the forward at one training size: the median of reps launches.
void time_case(int64_t B, int64_t H, int64_t L, int64_t D, bool causal, bool f16, int reps) {
  const size_t n = size_t(B * H * L * D);
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float *dout = nullptr, *dlse = nullptr;
  REMORA_CUDA_CHECK(cudaMalloc(&dq, n * 2));
  REMORA_CUDA_CHECK(cudaMalloc(&dk, n * 2));
  REMORA_CUDA_CHECK(cudaMalloc(&dv, n * 2));
  REMORA_CUDA_CHECK(cudaMalloc(&dout, n * 4));
  REMORA_CUDA_CHECK(cudaMalloc(&dlse, size_t(B * H * L) * 4));
  REMORA_CUDA_CHECK(cudaMemset(dq, 0x3c, n * 2));  // small finite values in both formats
  REMORA_CUDA_CHECK(cudaMemset(dk, 0x3c, n * 2));
  REMORA_CUDA_CHECK(cudaMemset(dv, 0x3c, n * 2));
  FlashMmaForward p;
  p.B = B, p.H = H, p.Lq = L, p.Lk = L, p.D = D;
  p.scale = 1.f / std::sqrt(float(D));
  p.f16 = f16;
  p.q = dq, p.k = dk, p.v = dv;
  p.causal = causal;
  p.o = dout;
  p.lse = dlse;
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  bool took = remora::cuda::flash_mma_forward(p);  // warm-up (and the attribute set once)
  std::vector<float> ms;
  for (int r = 0; r < reps && took; ++r) {
    cudaEventRecord(t0);
    took = remora::cuda::flash_mma_forward(p);
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float m = 0;
    cudaEventElapsedTime(&m, t0, t1);
    ms.push_back(m);
  }
  REMORA_CUDA_CHECK(cudaDeviceSynchronize());
  if (took && !ms.empty()) {
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    // q k^T and P v: 2 * 2 * B H L L D flops, half of them under the causal mask.
    const double flops = 4.0 * double(B * H) * double(L) * double(L) * double(D) * (causal ? 0.5 : 1.0);
    std::printf("{\"kernel\":\"flash_mma_fwd\",\"dtype\":\"%s\",\"B\":%lld,\"H\":%lld,\"L\":%lld,\"D\":%lld,"
                "\"causal\":%s,\"ms\":%.4f,\"tflops\":%.2f}\n",
                f16 ? "f16" : "bf16", (long long)B, (long long)H, (long long)L, (long long)D,
                causal ? "true" : "false", med, flops / (med * 1e-3) / 1e12);
  } else {
    std::printf("{\"kernel\":\"flash_mma_fwd\",\"L\":%lld,\"D\":%lld,\"declined\":true}\n", (long long)L, (long long)D);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  for (void* ptr : {dq, dk, dv, static_cast<void*>(dout), static_cast<void*>(dlse)}) cudaFree(ptr);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: flash_mma_check [--quick]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("flash_mma_check: no CUDA device: skipped\n");
    return 77;
  }
  try {
    const Case cases[] = {
        {"plain_d64", 2, 3, 130, 130, 64, false, false, -1, false},
        {"causal_memory_d64", 2, 2, 100, 228, 64, false, true, -1, false},
        {"window_d32", 1, 2, 150, 200, 32, false, true, 40, false},
        {"padding_d128", 2, 2, 70, 70, 128, false, false, -1, true},
        {"causal_padding_d128_f16", 2, 2, 129, 129, 128, true, true, -1, true},
        {"window2_d64_f16", 1, 3, 64, 64, 64, true, true, 2, false},
        {"one_row_d32", 2, 2, 1, 300, 32, false, true, -1, false},
        {"long_keys_d64", 1, 2, 40, 1100, 64, false, true, -1, true},
    };
    std::mt19937 gen(7);
    int failed = 0;
    for (const Case& c : cases) failed += !run_case(c, gen);
    if (!quick) {
      for (int64_t D : {64, 128})
        for (int64_t L : {1024, 4096}) time_case(8, 16, L, D, true, false, 10);
      time_case(8, 16, 2048, 64, false, false, 10);
      time_case(8, 16, 2048, 64, true, true, 10);
    }
    std::printf("flash_mma_check: %d of %zu comparisons failed\n", failed, sizeof(cases) / sizeof(cases[0]));
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("flash_mma_check: %s\n", e.what());
    return 1;
  }
}
