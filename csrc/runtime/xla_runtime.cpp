// Runtime implementation over jax's XLA client (jax.extend.backend). Buffers
// are jax Arrays, executables jax LoadedExecutables; every call into Python
// holds the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <new>
#include <atomic>
#include <pthread.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <set>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/collective_runtime.h"
#include "runtime/compile_cache.h"
#include "runtime/compile_tier.h"
#include "runtime/compiler_options.h"
#include "runtime/donation.h"
#include "runtime/host_allocator.h"
#include "runtime/modes.h"
#include "runtime/recompile_log.h"
#include "runtime/runtime.h"
#include "runtime/stderr_filter.h"
#include "device/warning_prefix.h"

namespace py = pybind11;

namespace torch_tpu::runtime {
bool job_failed();
namespace {

// Freed device buffers of at least kMinDonatedBytes, kept for fused
// programs to write results of the same type into (donation.h): on XLA:CPU
// a fresh buffer costs a page fault per 4 KiB, so a training step that
// frees its gradients and makes new ones pays for ~200 MB of faults without
// this. Oldest first out past the cap (TORCH_TPU_RECYCLE_BYTES; 0 turns
// recycling off); torch.tpu.empty_cache() empties it. The default is 2 GiB
// on XLA:CPU and 0 on accelerators, whose allocators already reuse freed
// memory cheaply (and where a kept buffer would be device memory XLA could
// not use). Touched with the GIL held.
class Recycler {
 public:
  // Called once the platform is known.
  void configure(bool host_memory) {
    cap_ = host_memory ? int64_t{2} << 30 : 0;
    if (const char* e = std::getenv("TORCH_TPU_RECYCLE_BYTES")) cap_ = std::max<long long>(0, std::atoll(e));
  }
  // A size worth giving a fused program.
  bool worth(const hlo::TensorType& t) const { return cap_ > 0 && byte_size(t) >= kMinDonatedBytes; }
  // Worth keeping now: only once some fused program has asked for a buffer
  // (a process that never fuses keeps nothing).
  bool wants(const hlo::TensorType& t) const { return asked_ && worth(t); }

  void put(PyObject* array, const hlo::TensorType& type, int device) {
    // A donated array was consumed by the program it was given to.
    int deleted = 1;
    if (PyObject* r = PyObject_CallMethod(array, "is_deleted", nullptr)) {
      deleted = PyObject_IsTrue(r);
      Py_DECREF(r);
    } else {
      PyErr_Clear();
    }
    if (deleted) {
      Py_DECREF(array);
      return;
    }
    entries_.push_back(Entry{array, type, device, byte_size(type)});
    bytes_ += entries_.back().bytes;
    while (bytes_ > cap_ && !entries_.empty()) drop(entries_.begin());
  }

  // A buffer of exactly this type on this device (the most recently freed), or null.
  PyObject* take(const hlo::TensorType& type, int device) {
    asked_ = true;
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (it->device == device && it->type == type) {
        PyObject* a = it->array;
        bytes_ -= it->bytes;
        entries_.erase(std::next(it).base());
        return a;
      }
    return nullptr;
  }

  void clear() {
    while (!entries_.empty()) drop(entries_.begin());
  }
  int64_t bytes(int device) const {
    int64_t n = 0;
    for (const auto& e : entries_)
      if (e.device == device) n += e.bytes;
    return n;
  }

 private:
  struct Entry {
    PyObject* array;
    hlo::TensorType type;
    int device;
    int64_t bytes;
  };
  void drop(std::list<Entry>::iterator it) {
    bytes_ -= it->bytes;
    Py_DECREF(it->array);
    entries_.erase(it);
  }
  std::list<Entry> entries_;
  int64_t bytes_ = 0, cap_ = 0;
  std::atomic<bool> asked_{false};
};

// The GIL for a scope, re-entrant: PyGILState_Ensure alone, which costs a
// thread-local read when the caller holds it already (every op does: the
// execution layer takes the runtime lock once per op). pybind11's
// gil_scoped_acquire looks its internals up first, ~1 us per op here.
class GilScope {
 public:
  GilScope() : state_(PyGILState_Ensure()) {}
  ~GilScope() { PyGILState_Release(state_); }
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;

 private:
  PyGILState_STATE state_;
};

// Python references dropped on a thread without the GIL wait here and are
// released (or recycled) by the next runtime call, which holds the GIL. The
// allocator's deleter therefore never blocks on the GIL.
class DeferredRelease {
 public:
  static DeferredRelease& instance() {
    static auto* q = new DeferredRelease();  // leaked: outlives interpreter teardown
    return *q;
  }
  Recycler& recycler() { return recycler_; }
  void release(PyObject* obj) {
    if (obj == nullptr || !Py_IsInitialized()) return;
    if (PyGILState_Check()) {
      Py_DECREF(obj);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(obj);
    any_.store(true, std::memory_order_release);
  }
  // A buffer nobody references any more: kept for reuse when it is large.
  void recycle(PyObject* obj, const hlo::TensorType& type, int device) {
    if (obj == nullptr || !Py_IsInitialized()) return;
    if (!recycler_.wants(type)) return release(obj);
    if (PyGILState_Check()) {
      recycler_.put(obj, type, device);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    pending_recycle_.push_back({obj, type, device});
    any_.store(true, std::memory_order_release);
  }
  void drain() {  // caller holds the GIL
    if (!any_.load(std::memory_order_acquire)) return;  // every runtime call: one load when nothing waits
    std::vector<PyObject*> todo;
    std::vector<Freed> freed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      any_.store(false, std::memory_order_relaxed);
      if (pending_.empty() && pending_recycle_.empty()) return;
      todo.swap(pending_);
      freed.swap(pending_recycle_);
    }
    for (auto* o : todo) Py_DECREF(o);
    for (auto& f : freed) recycler_.put(f.obj, f.type, f.device);
  }

 private:
  struct Freed {
    PyObject* obj;
    hlo::TensorType type;
    int device;
  };
  std::mutex mu_;
  std::atomic<bool> any_{false};  // something is pending
  std::vector<PyObject*> pending_;
  std::vector<Freed> pending_recycle_;
  Recycler recycler_;
};

class JaxBuffer final : public DeviceBuffer {
 public:
  JaxBuffer(py::object array, hlo::TensorType type, int device)
      : array_(array.release().ptr()), type_(std::move(type)), device_(device) {}
  ~JaxBuffer() override { DeferredRelease::instance().recycle(array_, type_, device_); }
  const hlo::TensorType& type() const override { return type_; }
  int device() const override { return device_; }
  py::handle array() const { return array_; }

 private:
  PyObject* array_;
  hlo::TensorType type_;
  int device_;
};

class JaxExecutable final : public Executable {
 public:
  JaxExecutable(py::object exe, int device, std::vector<hlo::TensorType> out_types)
      : exe_(exe.release().ptr()), device_(device), out_types_(std::move(out_types)) {}
  ~JaxExecutable() override {
    DeferredRelease::instance().release(exe_);
    DeferredRelease::instance().release(execute_sharded_);
    DeferredRelease::instance().release(handlers_);
  }
  int device() const override { return device_; }
  py::handle exe() const { return exe_; }
  const std::vector<hlo::TensorType>& out_types() const { return out_types_; }
  // One-device programs run through `execute_sharded` and jax's C++ result
  // handlers made once here (what jax's own dispatch does): jaxlib's
  // `execute` is a Python wrapper that builds a sharding in Python for
  // every output of every call (~3 us of a 10 us op).
  PyObject* execute_sharded() const { return execute_sharded_; }  // null: no fast path
  PyObject* handlers() const { return handlers_; }

  // A quick first compile (compile_tier.h) keeps what it needs to be
  // rebuilt at the normal level, and counts its runs. Mutable: every holder
  // of this executable gets the rebuilt program (GIL held).
  void set_quick(std::string text, std::string what) {
    quick_text_ = std::move(text);
    quick_what_ = std::move(what);
    quick_ = true;
  }
  bool quick() const { return quick_; }
  int note_run() const { return ++runs_; }
  std::string take_quick_text() const {
    quick_ = false;
    return std::move(quick_text_);
  }
  const std::string& quick_what() const { return quick_what_; }
  // The rebuilt program replaces this one (its fast path is set again).
  void replace(py::object exe) const {
    DeferredRelease::instance().release(exe_);
    DeferredRelease::instance().release(execute_sharded_);
    DeferredRelease::instance().release(handlers_);
    exe_ = exe.release().ptr();
    execute_sharded_ = handlers_ = nullptr;
  }
  void set_fast_path(py::object execute_sharded, py::object handlers) const {
    execute_sharded_ = execute_sharded.release().ptr();
    handlers_ = handlers.release().ptr();
  }

 private:
  mutable PyObject* exe_;
  mutable PyObject* execute_sharded_ = nullptr;
  mutable PyObject* handlers_ = nullptr;
  int device_;
  std::vector<hlo::TensorType> out_types_;
  mutable bool quick_ = false;
  mutable int runs_ = 0;
  mutable std::string quick_text_;
  std::string quick_what_;
};

const char* numpy_dtype_name(hlo::ElementType e) {
  using E = hlo::ElementType;
  switch (e) {
    case E::kPred: return "bool";
    case E::kI8: return "int8";
    case E::kI16: return "int16";
    case E::kI32: return "int32";
    case E::kI64: return "int64";
    case E::kU8: return "uint8";
    case E::kU32: return "uint32";
    case E::kU64: return "uint64";
    case E::kF16: return "float16";
    case E::kBF16: return "bfloat16";
    case E::kF32: return "float32";
    case E::kF64: return "float64";
    case E::kC64: return "complex64";
    case E::kC128: return "complex128";
    case E::kF8E4M3FN: return "float8_e4m3fn";
    case E::kF8E5M2: return "float8_e5m2";
    case E::kF8E4M3FNUZ: return "float8_e4m3fnuz";
    case E::kF8E5M2FNUZ: return "float8_e5m2fnuz";
  }
  return "?";
}

// Reads the result types off the module's signature line so that execute()
// can label its outputs without asking jax.
std::vector<hlo::TensorType> parse_result_types(const std::string& text);

// jax warns "os.fork() was called ... will likely lead to a deadlock" at
// every fork once its backend runs: every DataLoader worker (fork is
// Linux's default start method) printed it. The runtime already makes
// that fork safe for torch_tpu: its child handler (get() below) turns
// device use in the child into CUDA's "forked subprocess" error, and CPU
// work there is unaffected. So the warning is silenced for forks made by
// `multiprocessing` (DataLoader, mp.Process); a direct os.fork() in user
// code, whose child may call jax itself, keeps it.
void quiet_multiprocessing_fork_warning() {
  py::module_::import("warnings")
      .attr("filterwarnings")("ignore", py::arg("message") = R"(os\.fork\(\) was called)",
                              py::arg("category") = py::module_::import("builtins").attr("RuntimeWarning"),
                              py::arg("module") = R"(multiprocessing\.popen_fork)");
}

class XlaRuntime final : public Runtime {
 public:
  XlaRuntime() {
    py::gil_scoped_acquire gil;
    quiet_multiprocessing_fork_warning();
    py::module_ jax = py::module_::import("jax");
    auto config = jax.attr("config");
    // int64 and float64 must survive: torch's default integer is int64.
    config.attr("update")("jax_enable_x64", true);
    const char* platform_env = std::getenv("TORCH_TPU_PLATFORM");
    std::string wanted = platform_env ? platform_env : "";
    int virtual_devices = 1;
    if (const char* n = std::getenv("TORCH_TPU_NUM_DEVICES")) virtual_devices = std::max(1, std::atoi(n));
    job_ = job_from_env();
    // In a job each process owns one device (its tpu:0).
    if (job_.active) virtual_devices = 1;
    config.attr("update")("jax_num_cpu_devices", virtual_devices);
    // XLA:CPU's threads pick their malloc arena when the client starts.
    bool kept = false;
    // (The plugin probe scans installed packages: only when it is asked for.)
    if (keep_host_memory_requested() && (wanted == "cpu" || (wanted.empty() && !accelerator_plugin_installed(jax))))
      kept = keep_freed_host_memory();
    // Joining the job must come before any backend starts (jax refuses it
    // later): afterwards the backends list every process's devices.
    if (job_.active) {
      // A collective whose peers never come fails after this many seconds
      // instead of blocking inside execute forever. A group created before
      // the runtime starts sets it to its own timeout
      // (torch_tpu/distributed/__init__.py); one created later finds
      // torch's default group timeout, 30 min (TORCH_TPU_COLLECTIVE_TIMEOUT).
      const char* f = std::getenv("XLA_FLAGS");
      std::string flags = f ? f : "";
      if (flags.find("--xla_cpu_collective_timeout_seconds") == std::string::npos) {
        const char* t = std::getenv("TORCH_TPU_COLLECTIVE_TIMEOUT");
        flags += std::string(" --xla_cpu_collective_timeout_seconds=") + (t && *t ? t : "1800");
        setenv("XLA_FLAGS", flags.c_str(), 1);
      }
      join_job(jax, wanted);
    }

    py::module_ backend_mod = py::module_::import("jax.extend.backend");
    if (wanted.empty()) {
      // A real TPU (or GPU through its PJRT plugin) wins; XLA:CPU otherwise.
      for (const char* p : {"tpu", "gpu"}) {
        try {
          backend_mod.attr("get_backend")(p);
          wanted = p;
          break;
        } catch (py::error_already_set&) {
        }
      }
      if (wanted.empty()) wanted = "cpu";
    }
    backend_ = backend_mod.attr("get_backend")(wanted);
    // A `warnings.catch_warnings()` block around the runtime's start drops
    // the filter above when it exits; installing it again before every fork
    // keeps it. jax registered its warning's hook when its backend started
    // (just now), and "before" hooks run in reverse order: ours runs first.
    py::module_::import("os").attr("register_at_fork")(
        py::arg("before") = py::cpp_function([] { quiet_multiprocessing_fork_warning(); }));
    // torch's devices are this process's own (tpu:0 is the local device on
    // every rank); the job's global devices serve collectives.
    py::list devs = jax.attr("local_devices")(py::arg("backend") = wanted);
    for (auto d : devs) devices_.push_back(py::reinterpret_borrow<py::object>(d));
    if (wanted == "cpu") devices_.resize(std::min<size_t>(devices_.size(), virtual_devices));
    py::list all = jax.attr("devices")(wanted);
    for (auto d : all) global_devices_.push_back(py::reinterpret_borrow<py::object>(d));
    info_.platform = wanted;
    info_.device_kind = py::str(devices_.at(0).attr("device_kind"));
    info_.virtual_tpu = wanted == "cpu";
    info_.host_memory_kept = kept && wanted == "cpu";
    DeferredRelease::instance().recycler().configure(wanted == "cpu");
    // A real chip reports its memory (HBM); XLA:CPU reports nothing.
    try {
      py::object stats = devices_.at(0).attr("memory_stats")();
      if (!stats.is_none() && stats.contains("bytes_limit")) info_.memory_bytes = stats["bytes_limit"].cast<int64_t>();
    } catch (const py::error_already_set&) {
    }

    py::module_ xc = py::module_::import("jax._src.lib").attr("xla_client");
    compile_options_cls_ = xc.attr("CompileOptions");
    device_assignment_cls_ = xc.attr("DeviceAssignment");
    device_list_cls_ = xc.attr("DeviceList");
    batched_device_put_ = xc.attr("batched_device_put");
    immutable_during_call_ = xc.attr("HostBufferSemantics").attr("IMMUTABLE_ONLY_DURING_CALL");
    zero_copy_ = xc.attr("HostBufferSemantics").attr("ZERO_COPY");
    array_result_handler_ = py::getattr(xc, "array_result_handler", py::none());
    batched_block_until_ready_ = py::getattr(xc, "batched_block_until_ready", py::none());
    shaped_array_ = py::module_::import("jax").attr("core").attr("ShapedArray");
    py::object sharding_cls = py::module_::import("jax.sharding").attr("SingleDeviceSharding");
    for (auto& d : devices_) shardings_.push_back(sharding_cls(d));
    numpy_ = py::module_::import("numpy");
    py::module_ ml_dtypes = py::module_::import("ml_dtypes");
    for (int e = 0; e < hlo::kElementTypeCount; ++e) {
      auto et = static_cast<hlo::ElementType>(e);
      // numpy has no bfloat16 or 8-bit floats: ml_dtypes (jax's) names them.
      const bool ml = et == hlo::ElementType::kBF16 || hlo::is_float8(et);
      py::object dt = ml ? numpy_.attr("dtype")(ml_dtypes.attr(numpy_dtype_name(et)))
                         : numpy_.attr("dtype")(numpy_dtype_name(et));
      np_dtypes_.push_back(dt);
    }
    // At exit, the autograd engine's tpu threads finish what they hold
    // before Python finalises (python/exit_bindings.cpp). Registered after
    // jax's exit hooks, so it runs before them.
    py::module_::import("atexit").attr("register")(
        py::module_::import("torch_tpu._C").attr("_drain_autograd_threads"));
  }

  // The interpreter may already be gone when the process exits: never
  // touch Python objects from this destructor.
  ~XlaRuntime() override {
    for (auto* v : {&backend_, &compile_options_cls_, &device_assignment_cls_, &device_list_cls_, &batched_device_put_,
                    &immutable_during_call_, &zero_copy_, &shaped_array_, &numpy_, &array_result_handler_, &batched_block_until_ready_})
      v->release();
    for (auto& d : devices_) d.release();
    for (auto& d : global_devices_) d.release();
    for (auto& s : shardings_) s.release();
    for (auto& d : np_dtypes_) d.release();
    for (auto& [k, v] : avals_) v.release();
  }

  int device_count() override { return static_cast<int>(devices_.size()); }
  const PlatformInfo& platform() override { return info_; }
  int64_t compile_count() const override { return compiles_; }
  double compile_seconds() const override { return compile_seconds_; }

  // Looks the program up in the persistent cache (compile_cache.h) before
  // asking XLA, and stores what XLA compiled.
  ExecutableRef compile(const std::string& text, int device, const std::string& what) override {
    py::gil_scoped_acquire gil;
    DeferredRelease::instance().drain();
    check_device(device);
    try {
      py::object dl = device_list_cls_(py::make_tuple(devices_[device]));
      py::object options = compile_options(device);
      CompileTier tier = compile_tier(text, info_.is_cpu());
      py::object loaded = load_or_compile(text, dl, options, device, "", what, &tier);
      auto exe = std::make_shared<JaxExecutable>(loaded, device, parse_result_types(text));
      add_fast_path(*exe, loaded, device);
      if (tier == CompileTier::kQuick) exe->set_quick(text, what);
      return exe;
    } catch (py::error_already_set& e) {
      std::string why = e.what();
      // A misspelt option of a custom_compiler_options block: say so, without the program.
      TORCH_CHECK_VALUE(compiler_options_id() == 0 || why.find("compile option") == std::string::npos,
                        "torch.tpu.compiler.custom_compiler_options: XLA (", info_.platform,
                        ") refused the options in force [", compiler_options_text(), "]: ", why);
      TORCH_CHECK(false, "torch_tpu: XLA could not compile the program for ", what, ": ", why,
                  "\n--- StableHLO ---\n", text);
    }
  }

  // TORCH_TPU_LOG_RECOMPILES=1: one stderr line per XLA compile, naming
  // the op or fused program it is for and a hash of its StableHLO (the new
  // program key), then why the caller needed a new program (its
  // CompileNote, recompile_log.h), so an unexpected recompile shows its cause.
  void log_compile(const std::string& text, const std::string& what, double seconds) const {
    std::fprintf(stderr, "torch_tpu: XLA compile #%lld (%.3f s) for %s%s [program %016zx, %zu bytes]%s\n",
                 static_cast<long long>(compiles_), seconds, what.c_str(), note_label().c_str(),
                 std::hash<std::string>{}(text), text.size(), note_reason().c_str());
  }
  // TORCH_TPU_DUMP_DIR=dir: every program sent to XLA is written there as
  // NNNN-<what>.mlir, for reading or for timing it alone (XLA_FLAGS'
  // --xla_dump_to shows what XLA made of it; this shows what we gave it).
  void dump_program(const std::string& text, const std::string& what) const {
    static const char* dir = std::getenv("TORCH_TPU_DUMP_DIR");
    if (dir == nullptr || *dir == '\0') return;
    std::string name = what.substr(0, 40);
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    char prefix[16];
    std::snprintf(prefix, sizeof prefix, "%04lld-", static_cast<long long>(compiles_));
    std::string path = std::string(dir) + "/" + prefix + name + ".mlir";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
  }
  // A disk-cache hit is not an XLA compile, but still a new program in this
  // process: logged too, so a warm cache does not hide why it was needed.
  void log_load(const std::string& text, const std::string& what) const {
    std::fprintf(stderr, "torch_tpu: XLA cache load for %s%s [program %016zx, %zu bytes]%s\n", what.c_str(),
                 note_label().c_str(), std::hash<std::string>{}(text), text.size(), note_reason().c_str());
  }
  static std::string note_label() {
    const CompileNote* n = CompileNote::current();
    return n && !n->label().empty() ? " " + n->label() : "";
  }
  static std::string note_reason() {
    const CompileNote* n = CompileNote::current();
    return n && !n->reason().empty() ? ": " + n->reason() : "";
  }

  // Everything besides the text that decides the compiled program: the
  // host's part (CPU, XLA flags, format) and the client's.
  cache::KeyInputs key_inputs(int device) {
    if (base_key_inputs_.empty()) {
      base_key_inputs_ = cache::host_key_inputs();
      if (!info_.is_cpu()) {
        // Host CPU does not decide accelerator code.
        base_key_inputs_.erase("cpu_model");
        base_key_inputs_.erase("cpu_flags");
      }
      base_key_inputs_["jax_version"] = py::str(py::module_::import("jax").attr("__version__"));
      base_key_inputs_["jaxlib_version"] = py::str(py::module_::import("jax._src.lib").attr("version_str"));
      base_key_inputs_["platform"] = info_.platform;
      base_key_inputs_["platform_version"] = py::str(backend_.attr("platform_version"));
      base_key_inputs_["device_kind"] = info_.device_kind;
      base_key_inputs_["device_count"] = std::to_string(devices_.size());
      base_key_inputs_["global_device_count"] = std::to_string(global_devices_.size());
    }
    cache::KeyInputs in = base_key_inputs_;
    if (!allows_excess_precision()) in["allow_excess_precision"] = "0";
    // A user's options (compiler_options.h) make another program.
    if (std::string user = compiler_options_text(); !user.empty()) in["compiler_options"] = user;
    // The executable is pinned to this device by its device assignment.
    in["device_assignment"] = py::str(devices_[device].attr("id"));
    return in;
  }

  const JobInfo& job() const { return job_; }

  // The global id of process p's first device (its rank's device).
  int64_t process_device_id(int process) {
    py::gil_scoped_acquire gil;
    for (auto& d : global_devices_)
      if (d.attr("process_index").cast<int>() == process) return d.attr("id").cast<int64_t>();
    TORCH_CHECK(false, "torch_tpu: no device belongs to process ", process, " (", global_devices_.size(),
                " global device(s))");
  }

  // A program replicated over `device_ids` (global ids; replica i runs on
  // device_ids[i]), of which this process runs its local `device`'s part.
  // Cached on disk like an op program, keyed by the whole assignment.
  ExecutableRef compile_replicated(const std::string& text, const std::vector<int64_t>& device_ids, int device,
                                   std::vector<hlo::TensorType> out_types, const std::string& what) {
    py::gil_scoped_acquire gil;
    DeferredRelease::instance().drain();
    check_device(device);
    try {
      py::tuple devs(device_ids.size());
      py::list grid;
      std::string assignment;
      for (size_t i = 0; i < device_ids.size(); ++i) {
        devs[i] = global_device(device_ids[i]);
        grid.append(py::make_tuple(device_ids[i]));
        assignment += (i ? "," : "") + std::to_string(device_ids[i]);
      }
      py::object dl = device_list_cls_(devs);
      py::object options = new_compile_options();
      options.attr("num_replicas") = static_cast<int>(device_ids.size());
      options.attr("device_assignment") = device_assignment_cls_.attr("create")(numpy_.attr("array")(grid, "int32"));
      return std::make_shared<JaxExecutable>(load_or_compile(text, dl, options, device, assignment, what), device,
                                             std::move(out_types));
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "torch_tpu: XLA could not compile the collective program for ", what, ": ", e.what(),
                  "\n--- StableHLO ---\n", text);
    }
  }

 private:
  // Result handlers (one committed single-device array per output) for
  // JaxExecutable's fast path. A jaxlib without this API keeps `execute`.
  void add_fast_path(const JaxExecutable& exe, const py::object& loaded, int device) {
    if (array_result_handler_.is_none()) return;
    try {
      py::list handlers;
      for (const auto& t : exe.out_types()) {
        py::tuple shape(t.dims.size());
        for (size_t i = 0; i < t.dims.size(); ++i) shape[i] = t.dims[i];
        py::object aval = shaped_array_(shape, np_dtypes_[static_cast<int>(t.element)]);
        handlers.append(result_handler(aval, shardings_[device]));
      }
      exe.set_fast_path(loaded.attr("execute_sharded"), handlers);
    } catch (py::error_already_set&) {
    }
  }

  // jaxlib 0.10 takes `_skip_checks` (the sharding is known to fit);
  // 0.11 dropped the argument.
  py::object result_handler(const py::object& aval, const py::object& sharding) {
    if (handler_skips_checks_) {
      try {
        return array_result_handler_(aval, sharding, py::arg("committed") = true, py::arg("_skip_checks") = true);
      } catch (py::error_already_set& e) {
        if (!e.matches(PyExc_TypeError)) throw;
        handler_skips_checks_ = false;
      }
    }
    return array_result_handler_(aval, sharding, py::arg("committed") = true);
  }

  // Compile options every program gets. Off XLA:CPU, XLA's default
  // `xla_allow_excess_precision` lets it drop a round trip through a
  // narrower type (convert f32 -> bf16 -> f32): on a GPU that undid the
  // bf16 passes of the fp32 matmul precisions "medium"/"high" (their result
  // became the fp32 one) and would skip the per-op roundings that make a
  // bf16 op give PyTorch's answer. XLA:CPU keeps them at its default.
  // The choice is a key input of the disk cache (key_inputs()). A user
  // overrides it with torch.tpu.allow_excess_precision or XLA_FLAGS.
  bool allows_excess_precision() const { return runtime::allow_excess_precision(info_.is_cpu()); }
  py::object new_compile_options() {
    py::object options = compile_options_cls_();
    py::list overrides;
    if (!allows_excess_precision() && !xla_flags_set_excess_precision())
      overrides.append(py::make_tuple("xla_allow_excess_precision", py::bool_(false)));
    // custom_compiler_options' blocks (compiler_options.h), last so they win.
    py::object build = options.attr("executable_build_options");
    for (const auto& [name, value] : compiler_options()) {
      if (other_platforms_option(name)) continue;
      if (name == "xla_optimization_level" || name == "xla_memory_fitting_level") {
        // Not debug options: fields of the build options, as jax sets them.
        build.attr(name.substr(4).c_str()) = *xla_effort_level(value);  // checked when the block opened
      } else if (value == "true" || value == "True" || value == "false" || value == "False") {
        overrides.append(py::make_tuple(name, py::bool_(value[0] == 't' || value[0] == 'T')));  // XLA parses no "true"
      } else {
        overrides.append(py::make_tuple(name, value));
      }
    }
    if (!overrides.empty()) options.attr("env_option_overrides") = overrides;
    return options;
  }
  // An option of another platform's compiler (xla_tpu_* on XLA:CPU) is
  // left out, with a warning, so that a script written for a TPU runs
  // here unchanged; XLA would refuse it ("No such compile option").
  bool other_platforms_option(const std::string& name) {
    static const char* kFamilies[] = {"xla_cpu_", "xla_gpu_", "xla_tpu_"};
    const std::string own = info_.is_cpu() ? "xla_cpu_" : info_.platform == "tpu" ? "xla_tpu_" : "xla_gpu_";
    for (const char* family : kFamilies) {
      if (name.rfind(family, 0) != 0 || own == family) continue;
      static std::set<std::string> warned;
      if (warned.insert(name).second)
        TORCH_WARN(warning_prefix(WarningCategory::kTorchTpu), "torch.tpu.compiler.custom_compiler_options: ", name, " is an option of another platform's XLA; ",
                   "ignored on ", info_.platform);
      return true;
    }
    return false;
  }

  py::object compile_options(int device) {
    // The device assignment pins the single replica to this device.
    py::object options = new_compile_options();
    py::list grid;
    grid.append(py::make_tuple(devices_[device].attr("id")));
    options.attr("device_assignment") = device_assignment_cls_.attr("create")(numpy_.attr("array")(grid, "int32"));
    return options;
  }

  // The executable for `text`: loaded from the persistent cache when it
  // holds it, else compiled by XLA (counted, logged, stored). The cache key
  // is the device's key inputs, with `assignment` (global device ids) as the
  // device assignment when the program spans several devices.
  //
  // `tier` (compile_tier.h), when given, asks for that tier's options and
  // says on return which build came back: a quick one is replaced by an
  // optimised build already on disk, and a tier XLA refuses falls back to
  // optimised. Quick and small builds are cached on disk under their own
  // keys. `rebuild`: the optimised build of a quick one, counted in
  // quick_compile_stats() rather than compile_count().
  py::object load_or_compile(const std::string& text, const py::object& dl, const py::object& options, int device,
                             const std::string& assignment, const std::string& what, CompileTier* tier = nullptr,
                             bool rebuild = false) {
    CompileTier none = CompileTier::kOptimised;
    if (tier == nullptr) tier = &none;
    bool want_quick = *tier == CompileTier::kQuick;
    bool small = *tier == CompileTier::kSmall || *tier == CompileTier::kTiny;
    auto& disk = cache::DiskCache::instance();
    std::string key, plain_key;
    if (disk.enabled()) {
      cache::KeyInputs in = key_inputs(device);
      if (!assignment.empty()) in["device_assignment"] = assignment;
      key = plain_key = cache::make_key(text, in);
      if (small) {
        in["small_program_options"] = tier_options_text(*tier);
        key = cache::make_key(text, in);
      }
      if (py::object exe = load_cached(disk, key, dl, options); !exe.is_none()) {
        if (log_recompiles()) log_load(text, what);
        if (want_quick) *tier = CompileTier::kOptimised;
        return exe;
      }
      if (want_quick) {
        in["quick_options"] = quick_compile_options_text();
        key = cache::make_key(text, in);
        if (py::object exe = load_cached(disk, key, dl, options); !exe.is_none()) {
          if (log_recompiles()) log_load(text, what);
          return exe;
        }
      }
      disk.note_miss();
    }
    // The tier's options go after the ones every compile has (excess precision).
    py::list base_overrides;  // a copy: the fallback below restores it
    for (auto item : options.attr("env_option_overrides")) base_overrides.append(item);
    if (want_quick || small) {
      py::list overrides;
      for (auto item : base_overrides) overrides.append(item);
      for (const auto& option : tier_options(*tier)) {
        if (option.boolean)
          overrides.append(py::make_tuple(option.name, py::bool_(option.value != 0)));
        else
          overrides.append(py::make_tuple(option.name, option.value));
      }
      options.attr("env_option_overrides") = overrides;
    }
    if (!rebuild) dump_program(text, what);
    auto start = std::chrono::steady_clock::now();
    py::object exe;
    try {
      exe = backend_.attr("compile_and_load")(py::bytes(text), dl, options);
    } catch (py::error_already_set&) {
      if (!want_quick && !small) throw;
      // A quick or small-program compile XLA refuses (an op its elemental
      // emitters lack, an option this XLA does not know) is only a lost
      // shortcut: compile with the defaults, as an ordinary program.
      options.attr("env_option_overrides") = base_overrides;
      want_quick = small = false;
      *tier = CompileTier::kOptimised;
      key = plain_key;
      exe = backend_.attr("compile_and_load")(py::bytes(text), dl, options);
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rebuild) {
      note_rebuild(seconds);
      if (log_recompiles())
        std::fprintf(stderr, "torch_tpu: XLA rebuild (%.3f s) for %s: a quick first compile ran %d times, now optimised\n",
                     seconds, what.c_str(), kQuickRunsBeforeRebuild);
    } else {
      compile_seconds_ += seconds;
      ++compiles_;
      if (want_quick) note_quick_compile();
      if (small) note_small_compile(*tier == CompileTier::kTiny);
      if (log_recompiles()) log_compile(text, what, seconds);
    }
    if (disk.enabled()) store_cached(disk, key, exe);
    return exe;
  }

  // The optimised build of a quick program at its kQuickRunsBeforeRebuild-th
  // run. A failure keeps the quick build (it computes the same values).
  void rebuild(const JaxExecutable& exe) {
    std::string text = exe.take_quick_text();
    int device = exe.device();
    try {
      py::object dl = device_list_cls_(py::make_tuple(devices_[device]));
      py::object loaded = load_or_compile(text, dl, compile_options(device), device, "", exe.quick_what(), nullptr, true);
      exe.replace(loaded);
      add_fast_path(exe, loaded, device);
    } catch (py::error_already_set&) {
    }
  }

  // The cached executable, or None. An entry XLA refuses is removed (and
  // recompiled by the caller), never an error.
  py::object load_cached(cache::DiskCache& disk, const std::string& key, const py::object& dl,
                         const py::object& options) {
    auto start = std::chrono::steady_clock::now();
    auto bytes = disk.load(key);
    if (!bytes) return py::none();
    try {
      py::object exe;
      {
        std::optional<StderrFilter> quiet;
        if (info_.is_cpu()) quiet.emplace("Target machine feature +prefer-no-");
        exe = backend_.attr("deserialize_executable")(py::bytes(*bytes), dl, options);
      }
      disk.note_hit(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return exe;
    } catch (py::error_already_set&) {
      disk.discard(key);
      return py::none();
    }
  }

  void store_cached(cache::DiskCache& disk, const std::string& key, const py::object& exe) {
    std::string bytes;
    try {
      bytes = py::bytes(exe.attr("serialize")());
    } catch (py::error_already_set&) {
      return;  // a backend that cannot serialise: nothing to store
    }
    disk.store(key, bytes);
  }

 public:
  std::vector<BufferRef> execute(const Executable& exe_base, const std::vector<BufferRef>& args) override {
    auto& exe = static_cast<const JaxExecutable&>(exe_base);
    GilScope gil;
    DeferredRelease::instance().drain();
    if (exe.quick() && exe.note_run() >= kQuickRunsBeforeRebuild) rebuild(exe);
    py::list pyargs(args.size());
    for (size_t i = 0; i < args.size(); ++i)
      pyargs[i] = static_cast<JaxBuffer&>(*args[i]).array();
    py::object outs;
    try {
      if (PyObject* run = exe.execute_sharded()) {
        // Own references for the call: a rebuild on another thread (while
        // XLA releases the GIL) may replace the executable's.
        py::object run_ref = py::reinterpret_borrow<py::object>(run);
        py::object handlers_ref = py::reinterpret_borrow<py::object>(exe.handlers());
        auto results = py::reinterpret_steal<py::object>(PyObject_CallOneArg(run, pyargs.ptr()));
        if (!results) throw py::error_already_set();
        static PyObject* consume = PyUnicode_InternFromString("consume_with_handlers");
        PyObject* call[2] = {results.ptr(), handlers_ref.ptr()};
        outs = py::reinterpret_steal<py::object>(PyObject_VectorcallMethod(consume, call, 2, nullptr));
        if (!outs) throw py::error_already_set();
      } else {
        py::object loaded = py::reinterpret_borrow<py::object>(exe.exe());
        outs = loaded.attr("execute")(pyargs);
      }
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "torch_tpu: XLA execution failed: ", e.what());
    }
    PyObject* list = outs.ptr();
    TORCH_CHECK(PyList_Check(list), "torch_tpu: internal error: XLA returned no list of outputs");
    Py_ssize_t n = PyList_GET_SIZE(list);
    TORCH_CHECK(static_cast<size_t>(n) == exe.out_types().size(), "torch_tpu: internal error: program returned ", n,
                " outputs, expected ", exe.out_types().size());
    std::vector<BufferRef> result;
    result.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i)
      result.push_back(std::make_shared<JaxBuffer>(py::reinterpret_borrow<py::object>(PyList_GET_ITEM(list, i)),
                                                   exe.out_types()[i], exe.device()));
    return result;
  }

  BufferRef to_device(const void* data, const hlo::TensorType& type, int device) override {
    GilScope gil;
    DeferredRelease::instance().drain();
    check_device(device);
    py::object dt = np_dtypes_[static_cast<int>(type.element)];
    // A numpy view of the caller's memory; XLA copies it during the call.
    static int owner_tag = 0;
    py::capsule no_owner(&owner_tag, [](void*) {});
    py::array host(py::reinterpret_borrow<py::dtype>(dt), std::vector<py::ssize_t>(type.dims.begin(), type.dims.end()),
                   const_cast<void*>(data), no_owner);
    py::object arr = batched_device_put_(aval(type), shardings_[device], py::make_tuple(host),
                                         py::make_tuple(devices_[device]), true, true, immutable_during_call_);
    return std::make_shared<JaxBuffer>(std::move(arr), type, device);
  }

  // The host memory is calloc'ed: a large block comes from mmap, whose
  // pages read as zero until first written, so a zero fill (and a buffer
  // only written into) costs no pass over the memory at all here; XLA's own
  // zeros program writes every page. Another value is written once, by
  // doubling copies of the first element. On XLA:CPU the array is handed
  // over zero-copy (64-byte aligned, as XLA:CPU wants to alias it): the
  // device buffer owns the memory, freed with it (the capsule).
  BufferRef filled(const hlo::TensorType& type, const void* element, int device) override {
    GilScope gil;
    DeferredRelease::instance().drain();
    check_device(device);
    constexpr size_t kAlign = 64;
    const size_t elem = (static_cast<size_t>(hlo::element_bits(type.element)) + 7) / 8;  // pred: 1 bit, 1 byte
    const size_t nbytes = static_cast<size_t>(type.numel()) * elem;
    void* raw = std::calloc(nbytes + kAlign, 1);
    if (raw == nullptr) throw std::bad_alloc();
    auto* data = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kAlign - 1) & ~(kAlign - 1));
    bool nonzero = false;
    for (size_t i = 0; element != nullptr && i < elem && !nonzero; ++i) nonzero = static_cast<const char*>(element)[i] != 0;
    if (nonzero && nbytes > 0) {
      if (elem == 1) {
        std::memset(data, *static_cast<const unsigned char*>(element), nbytes);
      } else {
        std::memcpy(data, element, elem);
        for (size_t done = elem; done < nbytes;) {
          size_t n = std::min(done, nbytes - done);
          std::memcpy(data + done, data, n);
          done += n;
        }
      }
    }
    py::capsule owner(raw, [](void* p) { std::free(p); });
    py::object dt = np_dtypes_[static_cast<int>(type.element)];
    py::array host(py::reinterpret_borrow<py::dtype>(dt), std::vector<py::ssize_t>(type.dims.begin(), type.dims.end()),
                   data, owner);
    const bool zero_copy = info_.is_cpu();
    py::object arr = batched_device_put_(aval(type), shardings_[device], py::make_tuple(host),
                                         py::make_tuple(devices_[device]), true, !zero_copy,
                                         zero_copy ? zero_copy_ : immutable_during_call_);
    return std::make_shared<JaxBuffer>(std::move(arr), type, device);
  }

  // jax's ShapedArray of `type`, kept: building one is a Python call of
  // several us, as much as the rest of a small upload.
  const py::object& aval(const hlo::TensorType& type) {
    std::string key = type.str();
    auto it = avals_.find(key);
    if (it != avals_.end()) return it->second;
    if (avals_.size() >= 4096) avals_.clear();  // a bound (the GIL is held: they are released here)
    py::tuple shape(type.dims.size());
    for (size_t i = 0; i < type.dims.size(); ++i) shape[i] = type.dims[i];
    return avals_.emplace(key, shaped_array_(shape, np_dtypes_[static_cast<int>(type.element)])).first->second;
  }

  void to_host(const BufferRef& buf, void* dst, size_t nbytes) override {
    GilScope gil;
    DeferredRelease::instance().drain();
    py::array host = numpy_.attr("asarray")(static_cast<JaxBuffer&>(*buf).array());
    TORCH_CHECK(static_cast<size_t>(host.nbytes()) == nbytes, "torch_tpu: device buffer holds ", host.nbytes(),
                " bytes, expected ", nbytes);
    // Non-contiguous results never come back from XLA, but be safe.
    if (!(host.flags() & py::array::c_style)) host = numpy_.attr("ascontiguousarray")(host);
    std::memcpy(dst, host.data(), nbytes);
  }

  // Nothing to do here: the mode runtime waits for every program output
  // still referenced (wait_buffers), which is all a queued program leaves
  // behind. (A probe transfer waited behind them cost ~15 us a sync and
  // proved nothing on XLA:CPU, which runs independent programs concurrently;
  // on accelerators transfers go on their own stream.)
  void synchronize(int device) override {
    GilScope gil;
    DeferredRelease::instance().drain();
    check_device(device);
  }

  // Waits for all of `bufs` in one call (jaxlib's batched_block_until_ready);
  // false if that raised (a deleted or failed buffer), for the caller to
  // find which one, one by one.
  bool wait_all(const std::vector<BufferRef>& bufs) {
    GilScope gil;
    if (batched_block_until_ready_.is_none()) return false;
    py::list arrays(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) arrays[i] = static_cast<const JaxBuffer&>(*bufs[i]).array();
    try {
      batched_block_until_ready_(arrays);
      return true;
    } catch (py::error_already_set&) {
      return false;
    }
  }

 private:
  py::object global_device(int64_t id) {
    for (auto& d : global_devices_)
      if (d.attr("id").cast<int64_t>() == id) return d;
    TORCH_CHECK(false, "torch_tpu: no global device with id ", id);
  }

  // Whether jax may find a TPU or GPU when its backends start, known without
  // starting them: jax_platforms names the platforms when set; otherwise an
  // accelerator comes from libtpu or a PJRT plugin (the jax_plugins
  // namespace or entry points), which are what jax itself looks for.
  static bool accelerator_plugin_installed(py::module_& jax) {
    try {
      py::object platforms = jax.attr("config").attr("jax_platforms");
      if (!platforms.is_none() && !py::str(platforms).cast<std::string>().empty())
        return py::str(platforms).cast<std::string>().rfind("cpu", 0) != 0;
      py::module_ util = py::module_::import("importlib.util");
      if (!util.attr("find_spec")("libtpu").is_none()) return true;
      py::module_ pkgutil = py::module_::import("pkgutil");
      try {
        py::module_ ns = py::module_::import("jax_plugins");
        if (py::len(py::list(pkgutil.attr("iter_modules")(ns.attr("__path__")))) > 0) return true;
      } catch (py::error_already_set&) {
      }
      py::object eps = py::module_::import("importlib.metadata").attr("entry_points")(py::arg("group") = "jax_plugins");
      return py::len(py::list(eps)) > 0;
    } catch (py::error_already_set&) {
      return true;  // unknown: leave malloc as it is
    }
  }

  // jax.distributed.initialize with the job's coordinator. On XLA:CPU the
  // cross-process collectives go through gloo (XLA's own CPU collectives
  // implementation); on TPU and GPU through the chips' interconnect / NCCL.
  void join_job(py::module_& jax, const std::string& wanted) {
    auto config = jax.attr("config");
    if (wanted.empty() || wanted == "cpu") config.attr("update")("jax_cpu_collectives_implementation", "gloo");
    // A dead peer must not abort the survivors (jax's coordination service
    // otherwise kills every process once a heartbeat is missed): their
    // pending collectives fail, and tpu_dist raises DistBackendError.
    config.attr("update")("jax_enable_recoverability", true);
    py::dict kw;
    kw["coordinator_address"] = job_.coordinator;
    kw["num_processes"] = job_.world;
    kw["process_id"] = job_.rank;
    kw["initialization_timeout"] = job_.init_timeout_s;
    kw["heartbeat_timeout_seconds"] = job_.heartbeat_timeout_s;
    // An accelerator process owns the chip of its local rank.
    if (wanted == "tpu" || wanted == "gpu") kw["local_device_ids"] = py::make_tuple(job_.local_rank);
    try {
      // jax.distributed.initialize, with a callback that keeps the process
      // alive when the coordination service fails (rank 0 died): see _join.py.
      py::module_::import("torch_tpu.distributed._join").attr("join")(**kw);
      // Recoverable tasks skip jax's shutdown barrier, and a process whose
      // coordinator (rank 0) is gone is aborted: torch_tpu.distributed's
      // exit hook makes the ranks leave together.
      py::module_::import("torch_tpu.distributed._exit").attr("install")();
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "torch_tpu: rank ", job_.rank, " of ", job_.world, " could not join the job through the ",
                  "coordinator at ", job_.coordinator, " (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; the ",
                  "coordinator listens on TORCH_TPU_COORDINATOR_PORT or MASTER_PORT+1): ", e.what());
    }
  }

  void check_device(int device) {
    TORCH_CHECK(device >= 0 && device < device_count(), "torch_tpu: invalid device index ", device, " (",
                device_count(), " device(s) available)", job_device_hint());
  }

  py::object backend_, compile_options_cls_, device_assignment_cls_, device_list_cls_, batched_device_put_, immutable_during_call_, zero_copy_,
      shaped_array_, numpy_, array_result_handler_, batched_block_until_ready_;
  std::vector<py::object> devices_, global_devices_, shardings_, np_dtypes_;
  bool handler_skips_checks_ = true;  // result_handler(): jaxlib takes `_skip_checks`
  std::unordered_map<std::string, py::object> avals_;  // aval(): by type
  PlatformInfo info_;
  JobInfo job_;
  cache::KeyInputs base_key_inputs_;
  int64_t compiles_ = 0;
  double compile_seconds_ = 0;
};

hlo::ElementType parse_element(const std::string& s) {
  using E = hlo::ElementType;
  for (int e = 0; e < hlo::kElementTypeCount; ++e)
    if (s == hlo::element_name(static_cast<E>(e))) return static_cast<E>(e);
  TORCH_CHECK(false, "torch_tpu: unknown element type ", s);
}

std::vector<hlo::TensorType> parse_result_types(const std::string& text) {
  // The signature line is "func.func public @main(...) -> (T, T) {".
  auto sig = text.find("@main(");
  auto arrow = text.find(") -> (", sig);
  auto end = text.find(") {\n", arrow);
  std::string list = text.substr(arrow + 6, end - arrow - 6);
  std::vector<hlo::TensorType> types;
  size_t pos = 0;
  while ((pos = list.find("tensor<", pos)) != std::string::npos) {
    // The matching '>' (element types such as complex<f32> nest).
    size_t close = pos + 7;
    for (int depth = 1; depth > 0; ++close) depth += list[close] == '<' ? 1 : list[close] == '>' ? -1 : 0;
    --close;
    std::string inner = list.substr(pos + 7, close - pos - 7);
    hlo::TensorType t;
    size_t start = 0, x;
    while ((x = inner.find('x', start)) != std::string::npos && std::isdigit(inner[start])) {
      t.dims.push_back(std::stoll(inner.substr(start, x - start)));
      start = x + 1;
    }
    t.element = parse_element(inner.substr(start));
    types.push_back(std::move(t));
    pos = close;
  }
  return types;
}

XlaRuntime* g_runtime = nullptr;
Runtime* g_front = nullptr;  // the mode decorator over g_runtime

}  // namespace

bool xla_buffer_ready(const DeviceBuffer& buf) {
  GilScope gil;
  return static_cast<const JaxBuffer&>(buf).array().attr("is_ready")().cast<bool>();
}

void xla_buffer_delete(const DeviceBuffer& buf) {
  py::gil_scoped_acquire gil;
  static_cast<const JaxBuffer&>(buf).array().attr("delete")();
}

BufferRef take_recycled(const hlo::TensorType& type, int device) {
  py::gil_scoped_acquire gil;
  auto& d = DeferredRelease::instance();
  d.drain();
  PyObject* a = d.recycler().take(type, device);
  if (a == nullptr) return nullptr;
  return std::make_shared<JaxBuffer>(py::reinterpret_steal<py::object>(a), type, device);
}

void release_recycled() {
  py::gil_scoped_acquire gil;
  auto& d = DeferredRelease::instance();
  d.drain();
  d.recycler().clear();
}

int64_t recycled_bytes(int device) {
  if (!started()) return 0;
  py::gil_scoped_acquire gil;
  auto& d = DeferredRelease::instance();
  d.drain();
  return d.recycler().bytes(device);
}

bool recycles(const hlo::TensorType& type) { return DeferredRelease::instance().recycler().worth(type); }

BufferRef copy_buffer(const BufferRef& buf) {
  py::gil_scoped_acquire gil;
  auto& jb = static_cast<const JaxBuffer&>(*buf);
  // Leaked: must not be released after the interpreter is gone.
  static auto* copy = new py::object(py::module_::import("jax.numpy").attr("copy"));
  return std::make_shared<JaxBuffer>((*copy)(jb.array()), jb.type(), jb.device());
}

void xla_buffer_wait(const DeviceBuffer& buf, const char* what) {
  GilScope gil;
  static PyObject* is_deleted = PyUnicode_InternFromString("is_deleted");
  static PyObject* block = PyUnicode_InternFromString("block_until_ready");
  try {
    py::handle array = static_cast<const JaxBuffer&>(buf).array();
    if (array.attr(py::handle(is_deleted))().cast<bool>()) return;  // nothing left to wait for
    array.attr(py::handle(block))();
  } catch (py::error_already_set& e) {
    TORCH_CHECK(false, "torch_tpu: ", what, " failed on the device: ", e.what());
  }
}

void xla_buffers_wait(const std::vector<BufferRef>& bufs, const char* what) {
  if (bufs.empty()) return;
  if (bufs.size() == 1 || !g_runtime->wait_all(bufs))
    for (const auto& b : bufs) xla_buffer_wait(*b, what);  // skips deleted buffers, names a failure
}

RuntimeLock::RuntimeLock() : state_(static_cast<int>(PyGILState_Ensure())) {}
RuntimeLock::~RuntimeLock() { PyGILState_Release(static_cast<PyGILState_STATE>(state_)); }

namespace {
// Set in a child forked after the runtime started: jax's client and its
// threads stay behind in the parent, and the child's first device call
// waited on them forever (a DataLoader worker whose Dataset makes tpu
// tensors hung). CUDA raises "Cannot re-initialize CUDA in forked
// subprocess"; so does this. A child forked before the runtime started
// starts its own.
std::atomic<bool> g_forked_child{false};
}  // namespace

Runtime& get() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_runtime = new XlaRuntime();  // leaked on purpose: see ~XlaRuntime
    g_front = make_mode_runtime(*g_runtime).release();
    pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
  });
  TORCH_CHECK(!g_forked_child.load(std::memory_order_relaxed),
              "torch_tpu: cannot use the tpu device in a forked subprocess: the runtime started in the parent "
              "process and does not survive fork(). To use tpu with multiprocessing, use the 'spawn' start method "
              "(torch.multiprocessing.set_start_method('spawn'), or DataLoader(multiprocessing_context='spawn')), or "
              "keep a DataLoader worker's tensors on the CPU and move each batch to tpu in the main process");
  return *g_front;
}

bool started() { return g_front != nullptr; }

bool in_bad_fork() { return g_forked_child.load(std::memory_order_relaxed); }

JobInfo job_from_env() {
  JobInfo j;
  auto num = [](const char* name, int dflt) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : dflt;
  };
  j.world = num("WORLD_SIZE", 1);
  j.rank = num("RANK", 0);
  j.local_rank = num("LOCAL_RANK", 0);
  j.active = j.world > 1 && std::getenv("RANK") != nullptr && num("TORCH_TPU_DISTRIBUTED", 1) != 0;
  if (!j.active) return j;
  if (const char* a = std::getenv("TORCH_TPU_COORDINATOR_ADDRESS"); a && *a) {
    j.coordinator = a;
  } else {
    const char* host = std::getenv("MASTER_ADDR");
    int port = num("TORCH_TPU_COORDINATOR_PORT", num("MASTER_PORT", 29500) + 1);
    j.coordinator = std::string(host && *host ? host : "127.0.0.1") + ":" + std::to_string(port);
  }
  j.init_timeout_s = num("TORCH_TPU_INIT_TIMEOUT", 300);
  j.heartbeat_timeout_s = num("TORCH_TPU_HEARTBEAT_TIMEOUT", 100);
  return j;
}

namespace {
std::atomic<bool> g_job_failed{false};
}
void note_job_failure() { g_job_failed = true; }
bool job_failed() { return g_job_failed; }

const JobInfo& job() {
  get();
  return g_runtime->job();
}

std::string job_device_hint() {
  const JobInfo& j = job();
  if (!j.active) return "";
  return c10::str("; in a job each process owns one device, tpu:0, also named tpu:", j.local_rank,
                  " by its local rank as a CUDA script names its GPU (this is rank ", j.rank, ", local rank ",
                  j.local_rank, ")");
}

int64_t process_device_id(int process) {
  get();
  return g_runtime->process_device_id(process);
}

ExecutableRef compile_replicated(const std::string& text, const std::vector<int64_t>& device_ids, int device,
                                 std::vector<hlo::TensorType> out_types, const std::string& what) {
  get();
  return g_runtime->compile_replicated(text, device_ids, device, std::move(out_types), what);
}

namespace cache {
KeyInputs current_key_inputs(int device) {
  get();  // starts the runtime; get() itself returns the mode decorator
  auto& rt = *g_runtime;
  py::gil_scoped_acquire gil;
  return rt.key_inputs(device);
}
}  // namespace cache

}  // namespace torch_tpu::runtime
