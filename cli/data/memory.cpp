// Padded classification batches and the memory tasks copy and denoise
// (declared in cli/data.h).
#include <algorithm>
#include <cmath>

#include "../../ops/ops.h"
#include "../data.h"

namespace remora {
namespace data {

// ======================= padded classification =======================

ClassBatch pad_batch(const std::vector<std::vector<int64_t>>& seqs,
                     const std::vector<int64_t>& labels, int64_t pad_id, int64_t max_len) {
  REMORA_CHECK(!seqs.empty(), "pad_batch: no sequences");
  REMORA_CHECK(seqs.size() == labels.size(), "pad_batch: " << seqs.size() << " sequences but "
                                                           << labels.size()
                                                           << " labels; fix: one label each");
  REMORA_CHECK(max_len >= 0, "pad_batch: max_len must be >= 0 (0 = no limit), got " << max_len);
  const int64_t B = int64_t(seqs.size());
  int64_t L = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    REMORA_CHECK(!seqs[i].empty(), "pad_batch: sequence " << i
                                                          << " is empty (attention over only "
                                                             "padding is undefined); fix: drop it");
    L = std::max(L, int64_t(seqs[i].size()));
  }
  if (max_len > 0) L = std::min(L, max_len);
  ClassBatch cb;
  cb.ids = Tensor::full({B, L}, double(pad_id), DType::i64);
  cb.key_padding = Tensor::ones({B, L}, DType::i64);
  cb.labels = Tensor::from_vector(labels, {B}, DType::i64);
  cb.lengths = Tensor::empty({B}, DType::i64);
  int64_t* ids = cb.ids.data_ptr<int64_t>();
  int64_t* kp = cb.key_padding.data_ptr<int64_t>();
  int64_t* len = cb.lengths.data_ptr<int64_t>();
  for (int64_t r = 0; r < B; ++r) {
    const auto& s = seqs[size_t(r)];
    const int64_t n = std::min(L, int64_t(s.size()));
    len[r] = n;
    for (int64_t l = 0; l < n; ++l) {
      ids[r * L + l] = s[size_t(l)];
      kp[r * L + l] = 0;
    }
  }
  return cb;
}

// ======================= memory tasks =======================

MemoryBatch make_memory_batch(const MemoryTask& t, int64_t B, Generator& gen) {
  REMORA_CHECK(t.task == "copy" || t.task == "denoise",
               "memory task: unknown task \"" << t.task << "\"; expected copy or denoise");
  REMORA_CHECK(t.delay >= 1 && t.symbols >= 1 && t.length >= 1,
               "memory task: delay, symbols and length must be >= 1");
  REMORA_CHECK(t.task == "copy" || t.delay - 1 >= t.length,
               "denoise: delay - 1 = " << t.delay - 1 << " noise positions cannot hold " << t.length
                                       << " symbols; fix: delay >= length + 1");
  const int64_t L = t.seq_len(), delim = t.symbols + 1;
  std::vector<int64_t> x(size_t(B * L), 0), y(size_t(B * L), t.task == "copy" ? 0 : -100);
  for (int64_t b = 0; b < B; ++b) {
    int64_t* xr = x.data() + b * L;
    int64_t* yr = y.data() + b * L;
    std::vector<int64_t> sym(size_t(t.length));
    for (auto& v : sym) v = 1 + uniform_int(gen, t.symbols);
    if (t.task == "copy") {
      for (int64_t i = 0; i < t.length; ++i) xr[i] = sym[size_t(i)];
      xr[t.length + t.delay - 1] = delim;
    } else {
      // `length` distinct positions among the delay - 1 noise positions, in order.
      std::vector<int64_t> perm = permutation(t.delay - 1, gen);
      std::vector<int64_t> pos(perm.begin(), perm.begin() + t.length);
      std::sort(pos.begin(), pos.end());
      for (int64_t i = 0; i < t.length; ++i) xr[pos[size_t(i)]] = sym[size_t(i)];
      xr[t.delay - 1] = delim;
    }
    for (int64_t i = 0; i < t.length; ++i) yr[L - t.length + i] = sym[size_t(i)];
  }
  return {Tensor::from_vector(x, {B, L}), Tensor::from_vector(y, {B, L})};
}

std::pair<int64_t, int64_t> memory_num_correct(const MemoryTask& t, const Tensor& logits,
                                               const MemoryBatch& b) {
  const int64_t B = b.x.size(0), L = b.x.size(1);
  REMORA_CHECK(logits.dim() == 3 && logits.size(0) == B && logits.size(1) == L,
               "memory_num_correct: logits must be [" << B << ", " << L << ", V], got " << logits.str());
  const std::vector<int64_t> pred = argmax(logits.slice(1, L - t.length, L), -1).to_i64_vector();
  const std::vector<int64_t> y = b.y.slice(1, L - t.length, L).contiguous().to_i64_vector();
  int64_t correct = 0;
  for (size_t i = 0; i < y.size(); ++i) correct += pred[i] == y[i];
  return {correct, int64_t(y.size())};
}

}  // namespace data
}  // namespace remora
