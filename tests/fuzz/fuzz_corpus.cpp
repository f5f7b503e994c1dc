// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the corpus loaders (cli/data/text.cpp): character and byte
// corpora from a text file, the vocabulary a checkpoint stores (Vocab::from_json)
// and LM batching over what was loaded. Input: one mode byte, then the bytes.
//   mode % 3 == 0: load_char_corpus on a file holding the bytes
//   mode % 3 == 1: load_byte_corpus on that file
//   mode % 3 == 2: Vocab::from_json on the bytes
// Properties: every id is inside the vocabulary, decode(encode(train)) gives
// the training split back, LMStream batches hold ids from the split.
#include "../../cli/data.h"
#include "fuzz_util.h"

namespace {
void check_corpus(const remora::data::Corpus& c, const std::string& text, uint8_t shape) {
  using namespace remora;
  const int64_t V = c.vocab.size();
  for (const auto* split : {&c.train, &c.valid, &c.test})
    for (int64_t id : *split) FUZZ_ASSERT(id >= 0 && id < V);
  FUZZ_ASSERT(c.train.size() + c.valid.size() + c.test.size() == text.size());
  FUZZ_ASSERT(c.vocab.decode(c.train) == text.substr(0, c.train.size()));
  // The vocabulary survives its checkpoint form.
  FUZZ_ASSERT(data::Vocab::from_json(c.vocab.to_json()) == c.vocab);
  const int64_t B = 1 + (shape & 7), T = 1 + (shape >> 3);
  try {
    data::LMStream s(c.train, B, T);
    for (int i = 0; i < 3; ++i) {
      data::LMBatch b = s.next();
      FUZZ_ASSERT(b.x.shape() == Shape({B, T}) && b.y.shape() == Shape({B, T}));
      for (int64_t id : b.x.to_i64_vector()) FUZZ_ASSERT(id >= 0 && id < V);
    }
    s.set_position(s.num_segments() + 1);
    (void)s.next();
  } catch (const Error&) {
    // too little text for this batch shape: an Error naming the sizes
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remora;
  if (size < 2) return 0;
  const uint8_t mode = data[0], shape = data[1];
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  try {
    if (mode % 3 == 2) {
      const data::Vocab v = data::Vocab::from_json(text);
      FUZZ_ASSERT(data::Vocab::from_json(v.to_json()) == v);
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < v.size(); ++i) ids.push_back(i);
      FUZZ_ASSERT(int64_t(v.decode(ids, "?").size()) >= v.size() - 1);
      return 0;
    }
    const std::string path = fuzz::temp_dir() + "/corpus.txt";
    fuzz::write_file(path, text);
    const data::Corpus c = mode % 3 == 0 ? data::load_char_corpus(path) : data::load_byte_corpus(path);
    check_corpus(c, text, shape);
  } catch (const Error&) {
  }
  return 0;
}
