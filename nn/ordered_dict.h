// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// OrderedDict: the insertion-ordered name -> value list that Module's named_*
/// functions return, with torch::OrderedDict's interface:
///
///     for (const auto& item : model->named_parameters())
///       std::cout << item.key() << ": " << item.value().sizes() << "\n";
///     auto names = model->named_parameters().keys();
///     Tensor w = model->named_parameters()["fc.weight"];
///
/// An item is also a std::pair (item.first / item.second, structured bindings
/// `for (auto& [name, t] : ...)`), and the dict converts to a
/// std::vector<std::pair<K, V>> (nn::NamedTensors), so code written against
/// those keeps compiling.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.h"

namespace remora {

/// Key -> value pairs in insertion order (torch::OrderedDict). Keys are unique;
/// lookups by key compare the keys one by one (linear in the size). K needs
/// operator== and operator<< (for error messages).
template <typename K, typename V>
class OrderedDict {
 public:
  /// One entry: a std::pair with torch's key() / value() accessors.
  struct Item : std::pair<K, V> {
    using std::pair<K, V>::pair;
    /// From a pair (implicit).
    Item(const std::pair<K, V>& p) : std::pair<K, V>(p) {}  // NOLINT: implicit on purpose
    /// The key (first).
    const K& key() const { return this->first; }
    /// The value (second).
    V& value() { return this->second; }
    /// The value (second).
    const V& value() const { return this->second; }
  };
  /// Iterator over the items, in order.
  using iterator = typename std::vector<Item>::iterator;
  /// Read-only iterator over the items, in order.
  using const_iterator = typename std::vector<Item>::const_iterator;

  OrderedDict() = default;
  /// The pairs inserted in order (implicit; a repeated key is an Error).
  OrderedDict(const std::vector<std::pair<K, V>>& items) {  // NOLINT: implicit on purpose
    for (const auto& kv : items) insert(kv.first, kv.second);
  }
  /// `{{"a", x}, {"b", y}}`, inserted in order (a repeated key is an Error).
  OrderedDict(std::initializer_list<std::pair<K, V>> items) {
    for (const auto& kv : items) insert(kv.first, kv.second);
  }

  /// Appends key -> value; a key already present is an Error (as in torch).
  V& insert(const K& key, V value) {
    REMORA_CHECK(find(key) == nullptr, "OrderedDict::insert: key '" << key << "' already present");
    items_.emplace_back(key, std::move(value));
    return items_.back().second;
  }
  /// Sets key to value, appending it when absent.
  V& insert_or_assign(const K& key, V value) {
    if (V* v = find(key)) return *v = std::move(value);
    items_.emplace_back(key, std::move(value));
    return items_.back().second;
  }
  /// The value under key, or null.
  V* find(const K& key) {
    for (auto& it : items_)
      if (it.first == key) return &it.second;
    return nullptr;
  }
  /// The value under key, or null.
  const V* find(const K& key) const {
    for (const auto& it : items_)
      if (it.first == key) return &it.second;
    return nullptr;
  }
  /// Whether key is present.
  bool contains(const K& key) const { return find(key) != nullptr; }
  /// The value under key; an Error naming the key when it is absent.
  V& operator[](const K& key) { return at_key(key); }
  /// The value under key; an Error naming the key when it is absent.
  const V& operator[](const K& key) const { return const_cast<OrderedDict*>(this)->at_key(key); }
  /// The value under a string key (`dict["fc.weight"]`); an Error when absent.
  V& operator[](const char* key) { return at_key(K(key)); }
  /// The value under a string key; an Error when absent.
  const V& operator[](const char* key) const { return const_cast<OrderedDict*>(this)->at_key(K(key)); }
  /// The index-th item (insertion order); std::out_of_range past the end.
  Item& operator[](size_t index) { return items_.at(index); }
  /// The index-th item; std::out_of_range past the end.
  const Item& operator[](size_t index) const { return items_.at(index); }
  /// The index-th item (an int index, so `dict[0]` is not ambiguous).
  Item& operator[](int index) { return items_.at(size_t(index)); }
  /// The index-th item (an int index).
  const Item& operator[](int index) const { return items_.at(size_t(index)); }
  /// The index-th item (a long index).
  Item& operator[](long index) { return items_.at(size_t(index)); }
  /// The index-th item (a long index).
  const Item& operator[](long index) const { return items_.at(size_t(index)); }

  /// The keys, in order (a copy).
  std::vector<K> keys() const {
    std::vector<K> out;
    for (const auto& it : items_) out.push_back(it.first);
    return out;
  }
  /// The values, in order (copies; for Tensor, handles to the same tensors).
  std::vector<V> values() const {
    std::vector<V> out;
    for (const auto& it : items_) out.push_back(it.second);
    return out;
  }
  /// The items, in order.
  const std::vector<Item>& items() const { return items_; }
  /// Number of items.
  size_t size() const { return items_.size(); }
  /// Whether there are no items (torch's spelling).
  bool is_empty() const { return items_.empty(); }
  /// Whether there are no items (the standard containers' spelling).
  bool empty() const { return items_.empty(); }
  /// Removes every item.
  void clear() { items_.clear(); }
  /// The first item; std::out_of_range when empty.
  const Item& front() const { return items_.at(0); }
  /// The last item; std::out_of_range when empty.
  const Item& back() const { return items_.at(items_.size() - 1); }

  /// Iteration over the items, in order.
  iterator begin() { return items_.begin(); }
  /// The end of the iteration.
  iterator end() { return items_.end(); }
  /// Read-only iteration over the items, in order.
  const_iterator begin() const { return items_.begin(); }
  /// The end of the read-only iteration.
  const_iterator end() const { return items_.end(); }

  /// The items as plain pairs (what Remora's older signatures take).
  operator std::vector<std::pair<K, V>>() const {  // NOLINT: implicit on purpose
    return std::vector<std::pair<K, V>>(items_.begin(), items_.end());
  }

 private:
  V& at_key(const K& key) {
    V* v = find(key);
    REMORA_CHECK(v != nullptr, "OrderedDict: no key '" << key << "' (it has " << items_.size()
                                                       << " entries; keys() lists them)");
    return *v;
  }
  std::vector<Item> items_;
};

}  // namespace remora
