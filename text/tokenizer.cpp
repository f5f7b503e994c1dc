// SPDX-License-Identifier: BSD-3-Clause
#include "tokenizer.h"

#include <nlohmann/json.hpp>

#include "../core/error.h"
#include "word.h"
#include "wordpiece.h"

namespace remora {
namespace text {

Vocabulary::Vocabulary(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) ids_[tokens_[i]] = static_cast<int64_t>(i);
}

int64_t Vocabulary::add(const std::string& token) {
  auto [it, fresh] = ids_.emplace(token, size());
  if (fresh) tokens_.push_back(token);
  return it->second;
}

int64_t Vocabulary::id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& Vocabulary::token(int64_t id) const {
  REMORA_CHECK(id >= 0 && id < size(), "tokenizer: id " << id << " is outside the vocabulary [0, " << size() << ")");
  return tokens_[static_cast<size_t>(id)];
}

namespace {
// The tokenizer kinds: one line each.
struct Kind {
  const char* name;
  std::unique_ptr<Tokenizer> (*from_json)(const std::string&);
};
template <class T>
std::unique_ptr<Tokenizer> make(const std::string& j) {
  return std::make_unique<T>(T::from_json(j));
}
const Kind kKinds[] = {
    {"word", make<WordTokenizer>},
    {"wordpiece", make<WordPieceTokenizer>},
};
}  // namespace

std::vector<std::string> tokenizer_kinds() {
  std::vector<std::string> v;
  for (const Kind& k : kKinds) v.push_back(k.name);
  return v;
}

std::unique_ptr<Tokenizer> tokenizer_from_json(const std::string& json) {
  std::string kind;
  try {
    kind = nlohmann::json::parse(json).at("kind").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    REMORA_FAIL("tokenizer: the saved tokenizer is not a JSON object with a \"kind\": " << e.what());
  }
  for (const Kind& k : kKinds)
    if (kind == k.name) return k.from_json(json);
  std::string known;
  for (const Kind& k : kKinds) known += (known.empty() ? "" : ", ") + std::string(k.name);
  REMORA_FAIL("tokenizer: unknown kind \"" << kind << "\" (known: " << known << ")");
}

}  // namespace text
}  // namespace remora
