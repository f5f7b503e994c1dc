// SPDX-License-Identifier: BSD-3-Clause
// Matrix products with bf16 / f16 operands and f32 accumulation (cpu_bgemm.h).
#include "cpu_bgemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "../../core/error.h"
#include "../../core/half.h"
#include "cpu_backend.h"
#include "cpu_sgemm.h"

namespace remora {
namespace cpu_impl {

namespace {

// ---- scalar reference ----

template <typename T>
void gemm_scalar(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                 int64_t lda, const T* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float x = ta ? a[p * lda + i] : a[i * lda + p];
        const float y = tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += x * y;
      }
      float& o = c[i * ldc + j];
      o = beta == 0 ? alpha * acc : alpha * acc + beta * o;
    }
}

// ---- convert: f32 copies of the operands, the f32 kernel ----

// rows x cols of src (leading dimension ld) into dst (leading dimension cols).
template <typename T>
void to_f32(int64_t rows, int64_t cols, const T* src, int64_t ld, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = src + r * ld;
    float* d = dst + r * cols;
    for (int64_t j = 0; j < cols; ++j) d[j] = s[j];
  }
}

float* f32_scratch(int which, int64_t n) {
  thread_local std::vector<float> bufs[2];
  std::vector<float>& v = bufs[which];
  if (int64_t(v.size()) < n || int64_t(v.size()) > 4 * std::max<int64_t>(n, 1 << 16)) {
    std::vector<float>().swap(v);
    v.resize(size_t(std::max<int64_t>(n, 1)));
  }
  return v.data();
}

template <typename T>
void gemm_convert(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                  int64_t lda, const T* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // The stored layouts are kept (transposes stay flags of the f32 product).
  const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  float* fa = f32_scratch(0, ar * ac);
  float* fb = f32_scratch(1, br * bc);
  to_f32(ar, ac, a, lda, fa);
  to_f32(br, bc, b, ldb, fb);
  const int64_t flda = std::max<int64_t>(ac, 1), fldb = std::max<int64_t>(bc, 1);
#ifdef REMORA_SGEMM_TILES
  if (use_sgemm()) {
    sgemm(ta, tb, m, n, k, alpha, fa, flda, fb, fldb, beta, c, ldc);
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), alpha, fa, int(flda), fb, int(fldb), beta, c, int(ldc));
}

// ---- avx512bf16: vdpbf16ps tiles ----

// Operands packed in bf16 pairs along k (the unit of vdpbf16ps: lane j of
// dpbf16(acc, a, b) adds a.lo * b.lo + a.hi * b.hi of 32-bit lane j), k
// padded to even with zeros:
//  - A: ap[i * k2 + q] = (A(i, 2q), A(i, 2q + 1)), rows of k2 = k / 2 pairs;
//  - B: panels of 16 columns, bp[(t * k2 + q) * 16 + c] = (B(2q, 16t + c),
//    B(2q + 1, 16t + c)), zero past column n.
inline uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

void pack_a_pairs(bool ta, int64_t m, int64_t k, const uint16_t* a, int64_t lda, uint32_t* ap) {
  const int64_t k2 = (k + 1) / 2;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k2; ++q) {
      const int64_t p0 = 2 * q, p1 = 2 * q + 1;
      const uint16_t lo = ta ? a[p0 * lda + i] : a[i * lda + p0];
      const uint16_t hi = p1 < k ? (ta ? a[p1 * lda + i] : a[i * lda + p1]) : 0;
      ap[i * k2 + q] = pair(lo, hi);
    }
}

void pack_b_pairs(bool tb, int64_t n, int64_t k, const uint16_t* b, int64_t ldb, uint32_t* bp) {
  const int64_t k2 = (k + 1) / 2, panels = (n + 15) / 16;
  auto at = [&](int64_t p, int64_t j) -> uint16_t {
    if (p >= k || j >= n) return 0;
    return tb ? b[j * ldb + p] : b[p * ldb + j];
  };
  for (int64_t t = 0; t < panels; ++t)
    for (int64_t q = 0; q < k2; ++q)
      for (int64_t cc = 0; cc < 16; ++cc)
        bp[(t * k2 + q) * 16 + cc] = pair(at(2 * q, 16 * t + cc), at(2 * q + 1, 16 * t + cc));
}

// The tile of the avx512bf16 path with vdpbf16ps done in scalar code, in its
// order (per lane: acc += hi * hi, then acc += lo * lo, each rounded; subnormal
// inputs and results to zero): the same packing and traversal, so the
// indexing of that path is tested on CPUs without the instruction.
inline float daz(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }
inline float bf16_lo(uint32_t p) { return daz(f32_from_bf16_bits(uint16_t(p & 0xffffu))); }
inline float bf16_hi(uint32_t p) { return daz(f32_from_bf16_bits(uint16_t(p >> 16))); }

template <int R>
void tile_emulated(int64_t k2, const uint32_t* ap, const uint32_t* bp0, const uint32_t* bp1, float alpha,
                   float beta, float* c, int64_t ldc, int64_t ncols) {
  float acc[R][32] = {};
  for (int64_t q = 0; q < k2; ++q)
    for (int r = 0; r < R; ++r) {
      const uint32_t a = ap[r * k2 + q];
      for (int l = 0; l < 32; ++l) {
        const uint32_t* bp = l < 16 ? bp0 : bp1;
        if (!bp) continue;
        const uint32_t b = bp[q * 16 + (l & 15)];
        float t = acc[r][l];
        t = daz(t + bf16_hi(a) * bf16_hi(b));
        t = daz(t + bf16_lo(a) * bf16_lo(b));
        acc[r][l] = t;
      }
    }
  for (int r = 0; r < R; ++r)
    for (int64_t l = 0; l < ncols; ++l) {
      float& o = c[r * ldc + l];
      o = beta != 0 ? alpha * acc[r][l] + beta * o : alpha * acc[r][l];
    }
}

#if defined(__GNUC__) && defined(__x86_64__) && (__GNUC__ >= 10 || defined(__clang__))
#define REMORA_AVX512BF16 1
#define REMORA_BF16_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma"

// R rows x (16 or 32) columns of C: two panels (t, t + 1) when two, masked
// stores at the right edge.
template <int R>
__attribute__((target(REMORA_BF16_TARGET))) void tile_bf16(int64_t k2, const uint32_t* ap,
                                                             const uint32_t* bp0, const uint32_t* bp1,
                                                             float alpha, float beta, float* c,
                                                             int64_t ldc, int64_t ncols) {
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t q = 0; q < k2; ++q) {
    const __m512i b0 = _mm512_loadu_si512(bp0 + q * 16);
    const __m512i b1 = bp1 ? _mm512_loadu_si512(bp1 + q * 16) : _mm512_setzero_si512();
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_set1_epi32(int(ap[r * k2 + q]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], (__m512bh)av, (__m512bh)b0);
      if (bp1) acc1[r] = _mm512_dpbf16_ps(acc1[r], (__m512bh)av, (__m512bh)b1);
    }
  }
  const int64_t n0 = ncols < 16 ? ncols : 16, n1 = ncols > 16 ? ncols - 16 : 0;
  const __mmask16 m0 = __mmask16(n0 >= 16 ? 0xffffu : ((1u << n0) - 1u));
  const __mmask16 m1 = __mmask16(n1 >= 16 ? 0xffffu : ((1u << n1) - 1u));
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    __m512 y0 = _mm512_mul_ps(acc0[r], va);
    if (beta != 0) y0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), y0);
    _mm512_mask_storeu_ps(cr, m0, y0);
    if (n1 > 0) {
      __m512 y1 = _mm512_mul_ps(acc1[r], va);
      if (beta != 0) y1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), y1);
      _mm512_mask_storeu_ps(cr + 16, m1, y1);
    }
  }
}

bool cpu_has_avx512bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> 5) & 1u;  // CPUID.(EAX=7, ECX=1):EAX[5] = AVX512_BF16
}
#endif

// The avx512bf16 path (Emulated: its scalar twin, tile_emulated).
template <int R, bool Emulated>
void tile_rows(int64_t k2, const uint32_t* ap, const uint32_t* bp, int64_t panels, float alpha,
               float beta, float* c, int64_t ldc, int64_t n) {
  for (int64_t t = 0; t < panels; t += 2) {
    const bool two = t + 1 < panels;
    const int64_t ncols = std::min<int64_t>(n - 16 * t, two ? 32 : 16);
    const uint32_t* b0 = bp + t * k2 * 16;
    const uint32_t* b1 = two ? bp + (t + 1) * k2 * 16 : nullptr;
    if constexpr (Emulated) {
      tile_emulated<R>(k2, ap, b0, b1, alpha, beta, c + 16 * t, ldc, ncols);
    } else {
#ifdef REMORA_AVX512BF16
      tile_bf16<R>(k2, ap, b0, b1, alpha, beta, c + 16 * t, ldc, ncols);
#endif
    }
  }
}

template <bool Emulated>
void gemm_pairs(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                     int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const int64_t k2 = (k + 1) / 2, panels = (n + 15) / 16;
  thread_local std::vector<uint32_t> abuf, bbuf;
  abuf.resize(size_t(std::max<int64_t>(m * k2, 1)));
  bbuf.resize(size_t(std::max<int64_t>(panels * k2 * 16, 1)));
  pack_a_pairs(ta, m, k, a, lda, abuf.data());
  pack_b_pairs(tb, n, k, b, ldb, bbuf.data());
  int64_t i = 0;
  for (; i + 6 <= m; i += 6)
    tile_rows<6, Emulated>(k2, abuf.data() + i * k2, bbuf.data(), panels, alpha, beta, c + i * ldc, ldc, n);
  const uint32_t* ap = abuf.data() + i * k2;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5: tile_rows<5, Emulated>(k2, ap, bbuf.data(), panels, alpha, beta, ci, ldc, n); break;
    case 4: tile_rows<4, Emulated>(k2, ap, bbuf.data(), panels, alpha, beta, ci, ldc, n); break;
    case 3: tile_rows<3, Emulated>(k2, ap, bbuf.data(), panels, alpha, beta, ci, ldc, n); break;
    case 2: tile_rows<2, Emulated>(k2, ap, bbuf.data(), panels, alpha, beta, ci, ldc, n); break;
    case 1: tile_rows<1, Emulated>(k2, ap, bbuf.data(), panels, alpha, beta, ci, ldc, n); break;
    default: break;
  }
}


// ---- OpenBLAS's sbgemm ----

using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float,
                          const uint16_t*, int, const uint16_t*, int, float, float*, int);

SbgemmFn openblas_sbgemm() {
  static const SbgemmFn fn = [] {
    // Looked up, not linked: Debian's OpenBLAS (built without BUILD_BFLOAT16)
    // does not export it.
    SbgemmFn f = reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
    if (!f) return SbgemmFn(nullptr);
    // Native bf16 kernels exist only in these kernel sets.
    const char* core = openblas_get_corename();
    if (!core) return SbgemmFn(nullptr);
    for (const char* c : {"cooperlake", "sapphirerapids"})
      if (strcasecmp(core, c) == 0) return f;
    return SbgemmFn(nullptr);
  }();
  return fn;
}

BgemmPath parse_path(const char* e) {
  if (std::strcmp(e, "scalar") == 0) return BgemmPath::scalar;
  if (std::strcmp(e, "convert") == 0) return BgemmPath::convert;
  if (std::strcmp(e, "avx512bf16") == 0) return BgemmPath::avx512bf16;
  if (std::strcmp(e, "openblas") == 0) return BgemmPath::openblas;
  if (std::strcmp(e, "avx512bf16_emulated") == 0) return BgemmPath::avx512bf16_emulated;
  REMORA_FAIL("REMORA_BF16_GEMM: expected auto, openblas, avx512bf16, convert, scalar or avx512bf16_emulated, got '"
              << e << "'");
}

}  // namespace

const char* bgemm_path_name(BgemmPath p) {
  switch (p) {
    case BgemmPath::scalar: return "scalar";
    case BgemmPath::convert: return "convert";
    case BgemmPath::avx512bf16: return "avx512bf16";
    case BgemmPath::openblas: return "openblas";
    case BgemmPath::avx512bf16_emulated: return "avx512bf16_emulated";
  }
  return "?";
}

bool bgemm_path_available(BgemmPath p) {
  switch (p) {
    case BgemmPath::scalar:
    case BgemmPath::convert:
    case BgemmPath::avx512bf16_emulated: return true;
    case BgemmPath::avx512bf16:
#ifdef REMORA_AVX512BF16
      return use_avx512() && cpu_has_avx512bf16();
#else
      return false;
#endif
    case BgemmPath::openblas: return openblas_sbgemm() != nullptr;
  }
  return false;
}

BgemmPath bgemm_path() {
  static const BgemmPath path = [] {
    const char* e = std::getenv("REMORA_BF16_GEMM");
    if (e && *e && std::strcmp(e, "auto") != 0) {
      const BgemmPath p = parse_path(e);
      REMORA_CHECK(bgemm_path_available(p),
                   "REMORA_BF16_GEMM=" << e << ": this machine cannot run it ("
                                       << (p == BgemmPath::openblas
                                               ? "the loaded OpenBLAS exports no cblas_sbgemm with a native bf16 kernel set"
                                               : "the CPU lacks AVX512_BF16 or REMORA_CPU_ISA caps it below avx512")
                                       << "); use auto, convert or scalar");
      return p;
    }
    if (bgemm_path_available(BgemmPath::openblas)) return BgemmPath::openblas;
    if (bgemm_path_available(BgemmPath::avx512bf16)) return BgemmPath::avx512bf16;
    return BgemmPath::convert;
  }();
  return path;
}

void half_gemm_f32_on(BgemmPath path, DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta,
                      float* c, int64_t ldc) {
  REMORA_CHECK(dt == DType::bf16 || dt == DType::f16,
               "half gemm: expected bf16 or f16 operands, got " << dtype_name(dt));
  REMORA_CHECK(bgemm_path_available(path), "half gemm: path " << bgemm_path_name(path)
                                                              << " does not run on this machine");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.f : beta * c[i * ldc + j];
    return;
  }
  if (dt == DType::f16) {
    const f16_t* A = static_cast<const f16_t*>(a);
    const f16_t* B = static_cast<const f16_t*>(b);
    if (path == BgemmPath::scalar) return gemm_scalar(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, c, ldc);
    REMORA_CHECK(path == BgemmPath::convert, "half gemm: f16 products run the scalar or convert path, not "
                                                 << bgemm_path_name(path));
    return gemm_convert(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, c, ldc);
  }
  const bf16_t* A = static_cast<const bf16_t*>(a);
  const bf16_t* B = static_cast<const bf16_t*>(b);
  switch (path) {
    case BgemmPath::scalar: return gemm_scalar(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, c, ldc);
    case BgemmPath::convert: return gemm_convert(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, c, ldc);
    case BgemmPath::avx512bf16:
#ifdef REMORA_AVX512BF16
      return gemm_pairs<false>(ta, tb, m, n, k, alpha, reinterpret_cast<const uint16_t*>(a), lda,
                               reinterpret_cast<const uint16_t*>(b), ldb, beta, c, ldc);
#else
      break;
#endif
    case BgemmPath::avx512bf16_emulated:
      return gemm_pairs<true>(ta, tb, m, n, k, alpha, reinterpret_cast<const uint16_t*>(a), lda,
                              reinterpret_cast<const uint16_t*>(b), ldb, beta, c, ldc);
    case BgemmPath::openblas:
      openblas_sbgemm()(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                        int(m), int(n), int(k), alpha, reinterpret_cast<const uint16_t*>(a), int(lda),
                        reinterpret_cast<const uint16_t*>(b), int(ldb), beta, c, int(ldc));
      return;
  }
  REMORA_FAIL("half gemm: path " << bgemm_path_name(path) << " is not compiled in");
}

void half_gemm_f32(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const void* a, int64_t lda, const void* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  BgemmPath p = bgemm_path();
  if (dt == DType::f16 && p != BgemmPath::scalar) p = BgemmPath::convert;
  half_gemm_f32_on(p, dt, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace cpu_impl
}  // namespace remora
