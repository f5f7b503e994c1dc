// SPDX-License-Identifier: BSD-3-Clause
// The mma.sync FlashAttention-2 forward of backends/cuda/cuda_flash_mma.cu,
// run lane by lane by the emulator (emu_mma.h) and compared with the float64
// reference of flash_emu.cpp (the forward O and lse of a case without the
// positional term, dropout, REM heads or a bias tensor): bf16 and f16
// operands, D = 32, 64 and 128, several 128-row blocks and 64-key tiles with
// partial ones, memory before the segment (Lk > Lq), the causal window,
// causal skipping, key padding and rows that see no key. Included by
// flash_emu.cpp after its helpers.
namespace {

using remora::cuda::flash_mma::FwdArgs;

void round_f16(std::vector<float>& x) {
  for (float& e : x) e = emu::half_to_float(emu::float_to_half(e));
}

template <class E>
Guarded<E> as16(const std::vector<float>& x) {
  Guarded<E> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same<E, __half>::value) y[i] = __half{emu::float_to_half(x[i])};
    else y[i] = __float2bfloat16_rn(x[i]);
  }
  return y;
}

template <class E, int D>
bool run_mma(const Case& c, double tol) {
  constexpr bool kF16 = std::is_same<E, __half>::value;
  std::mt19937 rng(4321);
  const int64_t B = c.B, H = c.H, Lq = c.Lq, Lk = c.Lk;
  Data x;
  x.q = randn(size_t(B * H * Lq * D), rng);
  x.k = randn(size_t(B * H * Lk * D), rng);
  x.v = randn(size_t(B * H * Lk * D), rng);
  x.dO = randn(size_t(B * H * Lq * D), rng);  // (the reference's backward needs it)
  for (std::vector<float>* t : {&x.q, &x.k, &x.v}) {
    if (kF16) round_f16(*t);
    else round_bf16(*t);
  }
  x.G.assign(1, 0.f);
  if (c.key_padding) {
    x.kp.assign(size_t(B * Lk), 0.f);
    x.kp[size_t(Lk - 1)] = x.kp[size_t(Lk - 2)] = -INFINITY;
  }
  const Ref want = reference(c, x);
  const Guarded<E> q = as16<E>(x.q), k = as16<E>(x.k), v = as16<E>(x.v);
  const Guarded<float> kp = as<float>(x.kp);
  Guarded<float> O(size_t(B * H * Lq * D), NAN), lse(size_t(B * H * Lq), NAN);

  FwdArgs a{};
  a.B = B; a.H = H; a.Lq = Lq; a.Lk = Lk;
  a.scale = float(1.0 / std::sqrt(double(D)));
  a.kp = c.key_padding ? kp.data() : nullptr;
  a.causal = c.causal;
  a.window = c.window;
  using remora::cuda::flash_mma::kRows;
  const dim3 grid(unsigned((Lq + kRows - 1) / kRows), unsigned(B * H));
  emu::launch(grid, remora::cuda::flash_mma::kThreads, remora::cuda::flash_mma::Geo<D, E>::kSmem, [&] {
    remora::cuda::flash_mma::k_flash_mma_fwd<E, D>(a, q.data(), k.data(), v.data(), O.data(), lse.data());
  });

  std::printf("%s (mma.sync, %s, D %d, B %" PRId64 " H %" PRId64 " Lq %" PRId64 " Lk %" PRId64 ")\n",
              c.name.c_str(), kF16 ? "f16" : "bf16", D, B, H, Lq, Lk);
  bool ok = close("O", c, O, want.O, tol);
  // lse does not see the rounding of P (l sums the f32 probabilities): its
  // tolerance is f32 arithmetic, tight enough to show one key too many or too
  // few (which moves O by less than the bf16 tolerance).
  ok &= close("lse", c, lse, want.lse, 1e-5);
  const bool guards = q.intact() && k.intact() && v.intact() && kp.intact() && O.intact() && lse.intact();
  if (!guards) std::printf("  a write outside an array: FAILED\n");
  return ok && guards;
}

// Every case of the mma.sync forward; adds the number run to n and returns
// the number failed.
int run_mma_forward(int& n) {
  int failed = 0;
  auto check = [&](bool ok) {
    ++n;
    failed += !ok;
  };
  // P is rounded to the operand type for P v: bf16 keeps 8 bits, f16 11.
  const double tol_bf16 = 2e-2, tol_f16 = 4e-3;
  // Case fields: name, B, H, Hr, Lq, Lk, D, pos, causal, window, mask_tensor, key_padding.
  check(run_mma<bf16, 64>({"mma_causal", 1, 2, 0, 200, 200, 64, false, true}, tol_bf16));
  check(run_mma<__half, 64>({"mma_memory", 1, 2, 0, 130, 260, 64, false, true}, tol_f16));
  check(run_mma<bf16, 32>({"mma_window", 1, 1, 0, 100, 164, 32, false, true, 64}, tol_bf16));
  check(run_mma<__half, 32>({"mma_padding", 2, 1, 0, 70, 90, 32, false, false, -1, false, true}, tol_f16));
  check(run_mma<bf16, 128>({"mma_padding_memory", 2, 1, 0, 40, 150, 128, false, false, -1, false, true}, tol_bf16));
  check(run_mma<__half, 128>({"mma_causal_padding", 1, 1, 0, 150, 150, 128, false, true, -1, false, true},
                             tol_f16));
  // Row 128 (the second block's first) alone sees key 128 (the third tile's first).
  check(run_mma<bf16, 64>({"mma_causal_tile_edge", 1, 1, 0, 129, 129, 64, false, true}, tol_bf16));
  // Window 2: row i sees keys i - 1 and i; the second block starts at key 127.
  check(run_mma<__half, 32>({"mma_window_2", 1, 1, 0, 200, 200, 32, false, true, 2}, tol_f16));
  check(run_mma<bf16, 64>({"mma_rows_fully_masked", 1, 1, 0, 100, 30, 64, false, true}, tol_bf16));
  check(run_mma<__half, 64>({"mma_short", 1, 1, 0, 5, 7, 64, false, false}, tol_f16));
  return failed;
}

}  // namespace
