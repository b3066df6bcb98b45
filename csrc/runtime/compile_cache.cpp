// The persistent compilation cache (see compile_cache.h). Every caller holds
// the GIL (Runtime::compile and the Python bindings), which also serialises
// the counters here.
#include "runtime/compile_cache.h"
#include "device/warning_prefix.h"

#include <pybind11/pybind11.h>

#include <c10/util/Exception.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

namespace py = pybind11;
namespace fs = std::filesystem;

namespace torch_tpu::runtime::cache {
namespace {

constexpr const char* kMagic = "torch_tpu-xla-cache";
constexpr const char* kSuffix = ".xla";
constexpr const char* kTmpPrefix = ".tmp-";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : fallback;
}

// The first "model name" and "flags" lines (every core of a host reports the
// same); empty where /proc/cpuinfo does not exist.
void read_cpuinfo(std::string& model, std::string& flags) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  auto value = [](const std::string& l) {
    auto colon = l.find(':');
    auto start = colon == std::string::npos ? l.size() : l.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : l.substr(start);
  };
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = value(line);
    // "flags" on x86, "Features" on arm64.
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) flags = value(line);
  }
}

// Entry layout: a text header of four lines, then the serialised executable.
//   torch_tpu-xla-cache <format>\n<key>\n<payload bytes>\n<payload sha256>\n
std::string header(const std::string& key, const std::string& payload) {
  std::ostringstream h;
  h << kMagic << ' ' << kFormatVersion << '\n' << key << '\n' << payload.size() << '\n' << sha256_hex(payload) << '\n';
  return h.str();
}

// The payload of a well-formed entry for `key`, or nullopt.
std::optional<std::string> parse_entry(const std::string& data, const std::string& key) {
  std::istringstream in(data);
  std::string magic_line, key_line, size_line, sum_line;
  if (!std::getline(in, magic_line) || !std::getline(in, key_line) || !std::getline(in, size_line) ||
      !std::getline(in, sum_line))
    return std::nullopt;
  if (magic_line != std::string(kMagic) + ' ' + std::to_string(kFormatVersion) || key_line != key)
    return std::nullopt;
  if (size_line.empty() || size_line.find_first_not_of("0123456789") != std::string::npos || size_line.size() > 18)
    return std::nullopt;
  size_t size = std::stoull(size_line);
  auto start = static_cast<size_t>(in.tellg());
  if (in.fail() || data.size() - start != size) return std::nullopt;
  std::string payload = data.substr(start);
  if (sha256_hex(payload) != sum_line) return std::nullopt;
  return payload;
}

bool is_entry(const fs::directory_entry& e) {
  auto name = e.path().filename().string();
  return e.is_regular_file() && name.size() > 4 && name.compare(name.size() - 4, 4, kSuffix) == 0 &&
         name.rfind(kTmpPrefix, 0) != 0;
}

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  py::object h = py::module_::import("hashlib").attr("sha256")(py::bytes(bytes));
  return py::str(h.attr("hexdigest")());
}

KeyInputs host_key_inputs() {
  KeyInputs in;
  std::string model, flags;
  read_cpuinfo(model, flags);
  in["cpu_model"] = model;
  // The flags line is long; its hash decides as well as the line itself.
  in["cpu_flags"] = flags.empty() ? "" : sha256_hex(flags);
  in["xla_flags"] = env_or("XLA_FLAGS", "");
  in["libtpu_init_args"] = env_or("LIBTPU_INIT_ARGS", "");
  in["format"] = std::to_string(kFormatVersion);
  return in;
}

std::string make_key(const std::string& stablehlo, const KeyInputs& inputs) {
  // Length-prefixed fields: no two different input sets print the same bytes.
  std::ostringstream prefix;
  for (const auto& [name, value] : inputs) prefix << name.size() << ':' << name << '=' << value.size() << ':' << value << ';';
  py::object h = py::module_::import("hashlib").attr("sha256")();
  h.attr("update")(py::bytes(prefix.str()));
  h.attr("update")(py::bytes(stablehlo));
  return py::str(h.attr("hexdigest")());
}

DiskCache& DiskCache::instance() {
  static auto* c = new DiskCache();  // leaked: used until the process ends
  return *c;
}

DiskCache::DiskCache() {
  std::string off = env_or("TORCH_TPU_PERSISTENT_CACHE", "1");
  if (off == "0" || off == "false" || off == "off" || off == "no") return;
  if (const char* d = std::getenv("TORCH_TPU_CACHE_DIR")) {
    dir_ = d;  // "" means disabled
  } else {
    std::string base = env_or("XDG_CACHE_HOME", "");
    if (base.empty()) {
      std::string home = env_or("HOME", "");
      if (home.empty()) return;  // nowhere sensible to write
      base = home + "/.cache";
    }
    dir_ = base + "/torch_tpu/xla";
  }
  enabled_ = !dir_.empty();
  max_bytes_ = int64_t{4} << 30;
  if (const char* m = std::getenv("TORCH_TPU_CACHE_MAX_BYTES")) {
    char* end = nullptr;
    long long v = std::strtoll(m, &end, 10);
    TORCH_CHECK(end != m && *end == '\0' && v >= 0, "torch_tpu: TORCH_TPU_CACHE_MAX_BYTES must be a number of bytes ",
                "(0 for no limit), got '", m, "'");
    max_bytes_ = v;
  }
}

std::string DiskCache::path_for(const std::string& key) const { return dir_ + "/" + key + kSuffix; }

std::optional<std::string> DiskCache::load(const std::string& key) {
  if (!enabled_) return std::nullopt;
  std::string path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  auto payload = parse_entry(data, key);
  if (!payload) {
    discard(key);
    return payload;
  }
  // Recently used entries survive eviction.
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
  return payload;
}

void DiskCache::discard(const std::string& key) {
  ++stats_.corrupt;
  std::error_code ec;
  fs::remove(path_for(key), ec);  // another process may have removed it first
}

void DiskCache::store(const std::string& key, const std::string& executable) {
  if (!enabled_) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // Unique per process and call: concurrent writers of one key never share
  // a temporary file, and rename() makes whichever finishes last win whole.
  std::string tmp = dir_ + "/" + kTmpPrefix + key + "-" + std::to_string(::getpid()) + "-" +
                    std::to_string(tmp_counter_++);
  bool ok = !ec;
  if (ok) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    std::string head = header(key, executable);
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    out.write(executable.data(), static_cast<std::streamsize>(executable.size()));
    out.close();
    ok = out.good();
  }
  if (ok) {
    fs::rename(tmp, path_for(key), ec);
    ok = !ec;
  }
  if (!ok) {
    fs::remove(tmp, ec);
    ++stats_.store_errors;
    TORCH_WARN_ONCE(warning_prefix(WarningCategory::kPerformance), "torch_tpu: could not write to the compilation cache in ", dir_,
                    "; programs will be compiled again in new processes (set TORCH_TPU_CACHE_DIR to a writable "
                    "directory, or TORCH_TPU_PERSISTENT_CACHE=0 to turn the cache off)");
    return;
  }
  ++stats_.stores;
  if (max_bytes_ > 0) {
    // Count the directory once per process, then add what we write; other
    // processes' writes are seen at the next recount (after an eviction).
    if (approx_bytes_ < 0) {
      approx_bytes_ = stats().bytes;
    } else {
      approx_bytes_ += static_cast<int64_t>(fs::file_size(path_for(key), ec));
    }
    if (approx_bytes_ > max_bytes_) evict(key);
  }
}

void DiskCache::evict(const std::string& keep) {
  struct Entry {
    fs::file_time_type used;
    int64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code ec;
  std::string keep_name = keep + kSuffix;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_entry(*it)) continue;
    std::error_code e1, e2;
    auto bytes = static_cast<int64_t>(it->file_size(e1));
    auto used = it->last_write_time(e2);
    if (e1 || e2) continue;
    total += bytes;
    if (it->path().filename() != keep_name) entries.push_back({used, bytes, it->path()});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  int64_t target = max_bytes_ / 10 * 9;
  for (const auto& e : entries) {
    if (total <= target) break;
    std::error_code rm_ec;
    if (fs::remove(e.path, rm_ec)) ++stats_.evicted;
    if (!rm_ec) total -= e.bytes;  // gone, by us or by another process
  }
  approx_bytes_ = total;
}

Stats DiskCache::stats() const {
  Stats s = stats_;
  if (!enabled_) return s;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_entry(*it)) continue;
    std::error_code size_ec;
    auto size = it->file_size(size_ec);
    if (size_ec) continue;
    ++s.entries;
    s.bytes += static_cast<int64_t>(size);
  }
  return s;
}

int64_t DiskCache::clear() {
  if (!enabled_) return 0;
  // Only our own files: the directory may be one the user shares with
  // something else.
  std::vector<fs::path> doomed;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (is_entry(*it) || (it->is_regular_file() && name.rfind(kTmpPrefix, 0) == 0)) doomed.push_back(it->path());
  }
  int64_t removed = 0;
  for (const auto& p : doomed) {
    std::error_code rm_ec;
    if (fs::remove(p, rm_ec)) ++removed;
  }
  return removed;
}

}  // namespace torch_tpu::runtime::cache
