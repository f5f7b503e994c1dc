// SPDX-License-Identifier: BSD-3-Clause
// Tokenizers (text/): BERT WordPiece against HF's BertTokenizer, word level
// against the official Transformer-XL vocabulary code, saving and loading.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../core/error.h"
#include "../text/tokenizer.h"
#include "../text/word.h"
#include "../text/wordpiece.h"

using namespace remora;
using nlohmann::json;

namespace {
json read_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f);
  return json::parse(f);
}
const std::string kWordPiece = std::string(REMORA_TEST_DATA) + "/wordpiece/";
const std::string kWikiText = std::string(REMORA_TEST_DATA) + "/wikitext/";
}  // namespace

TEST_CASE("wordpiece: tokens, ids and decoding equal HF's BertTokenizer", "[text]") {
  const json g = read_json(kWordPiece + "golden.json");
  for (const char* variant : {"uncased", "cased"}) {
    INFO(variant);
    const text::WordPieceTokenizer tok = text::WordPieceTokenizer::from_pretrained(kWordPiece + variant);
    CHECK(tok.options().do_lower_case == (std::string(variant) == "uncased"));
    for (const json& s : g[variant]["samples"]) {
      const std::string t = s["text"].get<std::string>();
      INFO("text: " << t);
      CHECK(tok.tokenize(t) == s["tokens"].get<std::vector<std::string>>());
      const text::Encoding e = tok.encode_for_model(t);
      const auto ids = s["ids"].get<std::vector<int64_t>>();
      CHECK(e.ids == ids);
      CHECK(tok.decode(ids) == s["decoded"].get<std::string>());
      CHECK(tok.decode(ids, /*skip_special=*/true) == s["decoded_skip"].get<std::string>());
    }
    for (const json& p : g[variant]["pairs"]) {
      const std::string a = p["a"], b = p["b"];
      const text::Encoding e = tok.encode_for_model(a, &b);
      CHECK(e.ids == p["ids"].get<std::vector<int64_t>>());
      CHECK(e.type_ids == p["type_ids"].get<std::vector<int64_t>>());
      const text::Encoding t = tok.encode_for_model(a, &b, 12, /*pad=*/true);
      CHECK(t.ids == p["ids_12"].get<std::vector<int64_t>>());
      CHECK(t.type_ids == p["type_ids_12"].get<std::vector<int64_t>>());
      CHECK(t.attention_mask == p["mask_12"].get<std::vector<int64_t>>());
    }
  }
}

TEST_CASE("wordpiece: padding, truncation of one sequence, bad ids", "[text]") {
  const text::WordPieceTokenizer tok = text::WordPieceTokenizer::from_pretrained(kWordPiece + "uncased");
  const text::Encoding e = tok.encode_for_model("the quick brown fox", nullptr, 8, true);
  REQUIRE(e.ids.size() == 8);
  CHECK(e.ids.front() == tok.cls_id());
  const auto n = std::count(e.attention_mask.begin(), e.attention_mask.end(), 1);
  CHECK(e.ids[n - 1] == tok.sep_id());
  for (size_t i = n; i < 8; ++i) CHECK(e.ids[i] == tok.pad_id());
  const text::Encoding cut = tok.encode_for_model("the quick brown fox jumps over the lazy dog", nullptr, 5);
  CHECK(cut.ids.size() == 5);
  CHECK(cut.ids.back() == tok.sep_id());
  CHECK_THROWS_WITH(tok.decode({0, tok.vocab_size()}), Catch::Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(tok.encode_for_model("x", nullptr, 1), Catch::Contains("no room"));
  // Malformed UTF-8 is dropped like U+FFFD, never a crash.
  CHECK(tok.tokenize(std::string("the\xff\xfe fox\xc3")) == tok.tokenize("the fox"));
}

TEST_CASE("wordpiece: saved as JSON and as an HF directory, loaded back the same", "[text]") {
  const text::WordPieceTokenizer tok = text::WordPieceTokenizer::from_pretrained(kWordPiece + "cased");
  const std::string s = "Größe und Straße — über den Fuchs; 快速的狐狸 [MASK].";
  const std::unique_ptr<text::Tokenizer> back = text::tokenizer_from_json(tok.to_json());
  CHECK(back->kind() == "wordpiece");
  CHECK(back->encode(s) == tok.encode(s));
  CHECK(back->to_json() == tok.to_json());
  char dir[] = "/tmp/remora_wordpieceXXXXXX";
  REQUIRE(mkdtemp(dir));
  tok.save_pretrained(dir);
  const text::WordPieceTokenizer again = text::WordPieceTokenizer::from_pretrained(dir);
  CHECK(again.encode(s) == tok.encode(s));
  CHECK(again.to_json() == tok.to_json());
  std::remove((std::string(dir) + "/vocab.txt").c_str());
  std::remove((std::string(dir) + "/tokenizer_config.json").c_str());
  std::remove(dir);
}

TEST_CASE("word tokenizer: vocabulary and ids equal the official Transformer-XL code", "[text]") {
  const json g = read_json(kWikiText + "golden.json");
  for (const auto& [name, c] : g.items()) {
    INFO(name);
    text::WordTokenizerOptions o;
    const json& k = c["options"];
    o.special = k["special"].get<std::vector<std::string>>();
    o.lower_case = k["lower_case"].get<bool>();
    if (k.contains("min_freq")) o.min_freq = k["min_freq"].get<int64_t>();
    if (k.contains("max_size")) o.max_size = k["max_size"].get<int64_t>();
    const text::WordTokenizer tok = text::WordTokenizer::build_from_file(kWikiText + "wiki.train.tokens", o);
    CHECK(tok.vocabulary().tokens() == c["tokens"].get<std::vector<std::string>>());
    std::ifstream valid(kWikiText + "wiki.valid.tokens");
    std::vector<int64_t> ids;
    const int64_t n = tok.encode_lines(valid, [&](const std::vector<int64_t>& line) {
      ids.insert(ids.end(), line.begin(), line.end());
    });
    CHECK(n == static_cast<int64_t>(ids.size()));
    CHECK(ids == c["valid_ids"].get<std::vector<int64_t>>());
    // Saved and loaded back, the same tokenizer.
    const auto back = text::tokenizer_from_json(tok.to_json());
    CHECK(back->kind() == "word");
    CHECK(back->encode(" The king is <unk> . ") == tok.encode(" The king is <unk> . "));
  }
}

TEST_CASE("word tokenizer: lines, decoding, unknown words, Unicode", "[text]") {
  std::istringstream train("the cat sat\nthe dog sat\n\nΣΟΦΙΑ the\n");
  text::WordTokenizerOptions o;
  const text::WordTokenizer tok = text::WordTokenizer::build(train, o);
  CHECK(tok.vocabulary().tokens() == std::vector<std::string>{"<eos>", "the", "sat", "cat", "dog", "ΣΟΦΙΑ"});
  const std::vector<int64_t> ids = tok.encode("  the\u3000dog\tsat ");  // any Unicode space splits
  CHECK(ids == std::vector<int64_t>{1, 4, 2, 0});
  CHECK(tok.decode({1, 3, 2, 0, 1, 4}) == "the cat sat\nthe dog");
  CHECK(tok.decode({1, 3, 0}, /*skip_special=*/true) == "the cat");
  // No <unk> in this vocabulary: an unknown word is an error naming it.
  CHECK_THROWS_WITH(tok.encode("the bird"), Catch::Contains("\"bird\" is not in the vocabulary"));
  // Lower-casing is Python's str.lower(): a final sigma becomes ς.
  o.lower_case = true;
  std::istringstream train2("ΣΟΦΟΣ Sophia\n");
  const text::WordTokenizer low = text::WordTokenizer::build(train2, o);
  CHECK(low.vocabulary().tokens() == std::vector<std::string>{"<eos>", "σοφος", "sophia"});
  // add_eos needs the end-of-line token in the vocabulary.
  o.special = {};
  std::istringstream train3("a b\n");
  CHECK_THROWS_WITH(text::WordTokenizer::build(train3, o), Catch::Contains("add_eos"));
}

TEST_CASE("tokenizer registry: kinds, malformed and unknown saved tokenizers", "[text]") {
  CHECK(text::tokenizer_kinds() == std::vector<std::string>{"word", "wordpiece"});
  CHECK_THROWS_WITH(text::tokenizer_from_json("{\"kind\":\"sentencepiece\"}"),
                    Catch::Contains("unknown kind \"sentencepiece\" (known: word, wordpiece)"));
  CHECK_THROWS_WITH(text::tokenizer_from_json("[1,2"), Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(text::tokenizer_from_json("{\"kind\":\"word\",\"tokens\":[]}"), Catch::Contains("malformed"));
}
