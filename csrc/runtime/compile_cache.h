// The persistent compilation cache: compiled executables on disk, keyed by
// everything that decides what XLA would produce, so that a new process
// loads a program instead of compiling it again. Used by Runtime::compile,
// hence by every execution mode.
//
// Directory: TORCH_TPU_CACHE_DIR, default $XDG_CACHE_HOME/torch_tpu/xla or
// ~/.cache/torch_tpu/xla. Disabled by TORCH_TPU_CACHE_DIR="" or
// TORCH_TPU_PERSISTENT_CACHE=0. One file per program, <key>.xla. Size cap:
// TORCH_TPU_CACHE_MAX_BYTES (default 4 GiB, 0 = none); past it the least
// recently used entries go (a hit refreshes its file's modification time).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace torch_tpu::runtime::cache {

// Bumped whenever the entry layout or the way we build keys or compile
// options changes: old entries then simply stop matching.
constexpr int kFormatVersion = 1;

// What, besides the StableHLO text, decides the compiled program. Filled by
// the runtime; tests inject values through _C._compile_cache_key.
using KeyInputs = std::map<std::string, std::string>;

// The host's part of the key: CPU model and a hash of its feature flags
// (/proc/cpuinfo; XLA:CPU emits code for exactly this CPU), XLA_FLAGS and
// LIBTPU_INIT_ARGS, and our format version.
KeyInputs host_key_inputs();

// The inputs the runtime uses for programs on `device` (starts the runtime;
// defined in xla_runtime.cpp).
KeyInputs current_key_inputs(int device);

// Hex SHA-256 over the inputs (sorted by name) and the text. Needs the GIL
// (hashing is Python's hashlib).
std::string make_key(const std::string& stablehlo, const KeyInputs& inputs);

// Hex SHA-256 of bytes (GIL held).
std::string sha256_hex(const std::string& bytes);

struct Stats {
  int64_t hits = 0;        // programs loaded from disk
  int64_t misses = 0;      // lookups that found no usable entry
  int64_t corrupt = 0;     // entries found damaged (removed, then rebuilt)
  int64_t stores = 0;      // entries written
  int64_t store_errors = 0;
  int64_t evicted = 0;     // entries removed to stay under the size cap
  double load_seconds = 0;  // reading + deserialising hits
  int64_t entries = 0;     // files on disk now
  int64_t bytes = 0;
};

class DiskCache {
 public:
  // Reads the environment on first use (tests set it before that).
  static DiskCache& instance();

  bool enabled() const { return enabled_; }
  int64_t max_bytes() const { return max_bytes_; }
  const std::string& dir() const { return dir_; }

  // The serialised executable stored under `key`, or nullopt. An entry that
  // is truncated, garbled or written for another key is removed and counts
  // as corrupt (the caller compiles and stores a fresh one). GIL held.
  std::optional<std::string> load(const std::string& key);
  // Writes atomically (temporary file, then rename); failures only warn.
  void store(const std::string& key, const std::string& executable);
  // Removes an entry that passed its checksum but that XLA refused to load.
  void discard(const std::string& key);

  void note_hit(double seconds) { ++stats_.hits, stats_.load_seconds += seconds; }
  void note_miss() { ++stats_.misses; }

  Stats stats() const;  // counters, plus entries/bytes counted on disk now
  int64_t clear();      // deletes this cache's files; returns how many

 private:
  DiskCache();
  std::string path_for(const std::string& key) const;
  // Removes the least recently used entries, except `keep`, until the
  // directory holds at most 90% of the cap (so not every store evicts).
  void evict(const std::string& keep);

  bool enabled_ = false;
  std::string dir_;
  Stats stats_;
  int64_t tmp_counter_ = 0;
  int64_t max_bytes_ = 0;
  int64_t approx_bytes_ = -1;  // bytes on disk as far as we know; -1: not counted yet
};

}  // namespace torch_tpu::runtime::cache
