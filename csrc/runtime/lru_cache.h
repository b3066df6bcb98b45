// A string-keyed cache that keeps its `capacity` most recently used entries.
// Compiled programs are kept in these: each XLA executable holds JIT code
// mappings, and a process that compiles without bound (a long test run, many
// shapes) would otherwise reach the kernel's memory-map limit and crash.
#pragma once

#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace torch_tpu::runtime {

template <typename V>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The entry for `key` (now the most recently used), or nullptr.
  V* find(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.pos);
    return &it->second.value;
  }

  // Inserts (or replaces) and drops the least recently used entries beyond
  // the capacity.
  void put(const std::string& key, V value) {
    auto it = map_.find(key);
    if (it != map_.end()) {
      it->second.value = std::move(value);
      order_.splice(order_.begin(), order_, it->second.pos);
      return;
    }
    order_.push_front(key);
    map_.emplace(key, Entry{std::move(value), order_.begin()});
    while (map_.size() > capacity_) {
      map_.erase(order_.back());
      order_.pop_back();
      ++evictions_;
    }
  }

  void set_capacity(size_t capacity) { capacity_ = capacity < 1 ? 1 : capacity; }
  size_t size() const { return map_.size(); }
  size_t evictions() const { return evictions_; }

 private:
  struct Entry {
    V value;
    std::list<std::string>::iterator pos;  // in order_
  };
  size_t capacity_;
  size_t evictions_ = 0;
  std::unordered_map<std::string, Entry> map_;
  std::list<std::string> order_;  // most recently used first
};

}  // namespace torch_tpu::runtime
