// torch_tpu._C: the Python face of the C++ backend. Loading it registers
// the kernels, hooks, guard and generator; these functions serve torch.tpu.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/cat_growth.h"
#include "aten/structured_direct.h"
#include "device/generator.h"
#include "device/guard.h"
#include "device/storage.h"
#include "device/sync_debug.h"
#include "device/warning_prefix.h"
#include "exec/cpu_fallback.h"
#include "exec/fill.h"
#include "exec/op_runner.h"
#include "lowering/registry.h"
#include "runtime/compile_tier.h"
#include "runtime/compile_cache.h"
#include "runtime/compiler_options.h"
#include "runtime/deferred_checks.h"
#include "runtime/modes.h"
#include "runtime/recompile_log.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using namespace torch_tpu;

void init_replay_bindings(py::module& m);  // replay_bindings.cpp
void init_jax_op_bindings(py::module& m);  // jax_op_bindings.cpp
void init_tool_bindings(py::module& m);  // tool_bindings.cpp
void init_exit_bindings(py::module& m);  // exit_bindings.cpp
void init_region_bindings(py::module& m);  // region_bindings.cpp
void init_distributed_bindings(py::module& m);  // distributed/bindings.cpp

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu C++ backend";
  // After every static kernel registration (aten/structured_direct.cpp).
  int direct = aten::register_structured_direct();
  m.def("_structured_direct_count", [direct] { return direct; });
  init_replay_bindings(m);
  init_jax_op_bindings(m);
  init_tool_bindings(m);
  init_exit_bindings(m);
  init_region_bindings(m);
  init_distributed_bindings(m);
  m.def("_device_count", [] { return static_cast<int>(device::device_count()); });
  m.def("_runtime_started", [] { return runtime::started(); });
  m.def("_in_bad_fork", [] { return runtime::in_bad_fork(); });
  m.def("_current_device", [] { return static_cast<int>(device::current_device()); });
  m.def("_set_device", [](int i) { device::set_current_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("_set_sync_debug_mode", [](int mode) { device::set_sync_debug_mode(mode); });
  m.def("_get_sync_debug_mode", [] { return device::sync_debug_mode(); });
  m.def("_own_index", [](int i) { return static_cast<int>(device::own_index(static_cast<c10::DeviceIndex>(i))); });
  m.def("_synchronize", [](int i) {
    // A failed device-side check raises here (deferred_checks.h) with its
    // op's Python type, as a kernel error would through torch's bindings.
    try {
      py::gil_scoped_release no_gil;
      runtime::get().synchronize(i);
    } catch (const c10::IndexError& e) {
      throw py::index_error(e.what_without_backtrace());
    } catch (const c10::LinAlgError& e) {
      py::object linalg_error = py::module_::import("torch").attr("linalg").attr("LinAlgError");
      PyErr_SetString(linalg_error.ptr(), e.what_without_backtrace());
      throw py::error_already_set();
    } catch (const c10::Error& e) {
      throw std::runtime_error(e.what_without_backtrace());
    }
  });
  m.def("_platform", [] {
    const auto& p = runtime::get().platform();
    return py::make_tuple(p.platform, p.device_kind, p.virtual_tpu);
  });
  m.def("_memory_stats", [](int i) {
    auto s = device::memory_stats(i);
    py::dict d;
    d["allocated_bytes.all.current"] = s.allocated_bytes;
    d["allocated_bytes.all.peak"] = s.peak_bytes;
    d["allocation.all.allocated"] = s.num_allocs;
    d["allocation.all.freed"] = s.num_frees;
    d["allocation.all.current"] = s.num_live;
    d["allocated_bytes.all.allocated"] = s.allocated_total;
    d["allocated_bytes.all.freed"] = s.freed_total;
    d["num_ooms"] = s.num_ooms;
    d["limit"] = s.limit;
    return d;
  });
  m.def("_set_memory_limit", [](int i, int64_t bytes) { device::set_memory_limit(i, bytes); });
  m.def("_reset_peak_memory_stats", [](int i) { device::reset_peak_memory(i); });
  m.def("_reset_accumulated_memory_stats", [](int i) { device::reset_accumulated_memory(i); });
  m.def("_default_generator", [](int i) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(device::default_generator(static_cast<c10::DeviceIndex>(i))));
  });
  m.def("_manual_seed_all", [](uint64_t seed) { device::manual_seed_all(seed); });
  m.def("_compile_count", [] { return runtime::started() ? runtime::get().compile_count() : 0; });
  m.def("_compile_seconds", [] { return runtime::started() ? runtime::get().compile_seconds() : 0.0; });
  // Quick first compiles (runtime/compile_tier.h): graph_replay.py opens the
  // scope around a graph's first call.
  m.def("_set_quick_compile", [](bool on) { return runtime::set_quick_compile(on); });
  // Their XLA options, "name=value;..." (the setter returns the previous).
  m.def("_quick_compile_options", [] { return runtime::quick_compile_options_text(); });
  m.def("_set_quick_compile_options", [](const std::string& text) { return runtime::set_quick_compile_options(text); });
  // The warning categories' message prefixes, by name (device/warning_prefix.h).
  m.def("_warning_prefixes", [] {
    std::map<std::string, std::string> prefixes;
    for (auto c : kWarningCategories) prefixes[warning_category_name(c)] = warning_prefix(c);
    return prefixes;
  });
  // A user's XLA options (runtime/compiler_options.h): torch.tpu.compiler's
  // custom_compiler_options blocks and torch.tpu.allow_excess_precision.
  m.def("_push_compiler_options", [](const std::vector<std::pair<std::string, std::string>>& options) {
    runtime::push_compiler_options(options);
  });
  m.def("_pop_compiler_options", [] { runtime::pop_compiler_options(); });
  m.def("_compiler_options", [] { return runtime::compiler_options(); });
  m.def("_set_allow_excess_precision", [](std::optional<bool> allow) { runtime::set_allow_excess_precision(allow); });
  // The value in force; reading it starts the runtime (the default is the platform's).
  m.def("_allow_excess_precision", [] { return runtime::allow_excess_precision(runtime::get().platform().is_cpu()); });
  // Whether a StableHLO text is a small program, a tiny one (compile_tier.h).
  m.def("_is_small_program", [](const std::string& text) { return runtime::is_small_program(text); });
  m.def("_is_tiny_program", [](const std::string& text) { return runtime::size_tier(text) == runtime::CompileTier::kTiny; });
  m.def("_quick_compile_stats", [] {
    auto s = runtime::quick_compile_stats();
    py::dict d;
    d["quick_compiles"] = s.quick_compiles;
    d["quick_rebuilds"] = s.rebuilds;
    d["quick_rebuild_seconds"] = s.rebuild_seconds;
    d["small_compiles"] = s.small_compiles;
    d["tiny_compiles"] = s.tiny_compiles;
    return d;
  });
  m.def("_host_fills", [] { return exec::host_fill_count(); });
  m.def("_program_cache_stats", [] {
    auto s = exec::program_cache_stats();
    return py::make_tuple(s.programs, s.hits, s.misses);
  });
  // The persistent compilation cache; none of these starts the runtime
  // except _compile_cache_key_inputs.
  m.def("_compile_cache_stats", [] {
    auto& disk = runtime::cache::DiskCache::instance();
    auto s = disk.stats();
    py::dict d;
    d["enabled"] = disk.enabled();
    d["dir"] = disk.dir();
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["corrupt"] = s.corrupt;
    d["stores"] = s.stores;
    d["store_errors"] = s.store_errors;
    d["evicted"] = s.evicted;
    d["max_bytes"] = disk.max_bytes();
    d["load_seconds"] = s.load_seconds;
    d["entries"] = s.entries;
    d["bytes"] = s.bytes;
    return d;
  });
  m.def("_clear_compile_cache", [] { return runtime::cache::DiskCache::instance().clear(); });
  m.def("_compile_cache_key", [](const std::string& stablehlo, const std::map<std::string, std::string>& inputs) {
    return runtime::cache::make_key(stablehlo, inputs);
  });
  m.def("_compile_cache_key_inputs", [](int device) { return runtime::cache::current_key_inputs(device); },
        py::arg("device") = 0);
  m.def("_lowered_ops", [] { return lowering::rule_names(); });
  // Execution modes: 0 strict, 1 debug, 2 fused (runtime/modes.h).
  m.def("_get_eager_mode", [] { return static_cast<int>(runtime::eager_mode()); });
  m.def("_set_eager_mode", [](int mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "torch_tpu: unknown eager mode ", mode);
    runtime::set_eager_mode(static_cast<runtime::EagerMode>(mode));
  });
  m.def("_mark_step", [] { runtime::mark_step(); });
  m.def("_set_fuse_split_paused", [](bool paused) { return runtime::set_split_paused(paused); });
  m.def("_fuse_keep_trace_whole", [](int device) { runtime::keep_trace_whole(device); });
  // bound(result, dim) -> BoundedTensor (torch_tpu/auto_bucket.py); None turns it off.
  m.def("_set_cat_bucketing", [](py::object bound) {
    if (bound.is_none()) {
      aten::set_cat_bucketing(nullptr);
      return;
    }
    auto keep = std::make_shared<py::object>(std::move(bound));
    aten::set_cat_bucketing([keep](const at::Tensor& t, int64_t dim) -> at::Tensor {
      py::gil_scoped_acquire gil;
      try {
        return py::cast<at::Tensor>((*keep)(t, dim));
      } catch (py::error_already_set& e) {
        TORCH_CHECK(false, e.what());
      }
    });
  });
  // Freed buffers kept for reuse by fused programs (runtime/donation.h).
  m.def("_empty_cache", [] {
    if (runtime::started()) runtime::release_recycled();
  });
  m.def("_recycled_bytes", [](int device) { return runtime::recycled_bytes(device); });
  m.def("_fusion_stats", [] {
    auto s = runtime::fusion_stats();
    py::dict d;
    d["flushes"] = s.flushes;
    d["fused_ops"] = s.fused_ops;
    d["compiles"] = s.compiles;
    d["cache_hits"] = s.cache_hits;
    d["skipped"] = s.skipped;
    d["pending_ops"] = s.pending_ops;
    d["donated"] = s.donated;
    d["donation_copies"] = s.donation_copies;
    d["chained_replays"] = s.chained_replays;
    d["chain_cuts"] = s.chain_cuts;
    d["split_traces"] = s.split_traces;
    d["window_programs"] = s.window_programs;
    return d;
  });
  m.def("_begin_program_window", [] { runtime::begin_program_window(); });
  // Recompile visibility (runtime/recompile_log.h): counters, the last
  // entries, and the torch.compile backend's graph entries.
  m.def("_recompile_stats", [] {
    auto s = runtime::recompile_stats();
    py::dict d;
    d["programs"] = s.programs;
    d["recompiles"] = s.recompiles;
    d["op_recompiles"] = s.op_recompiles;
    d["fused_recompiles"] = s.fused_recompiles;
    d["graph_recompiles"] = s.graph_recompiles;
    d["op_reloads"] = s.op_reloads;
    return d;
  });
  m.def("_recompile_log", [](size_t n) {
    py::list out;
    for (const auto& e : runtime::recent_compiles(n)) {
      py::dict d;
      d["kind"] = e.kind;
      d["what"] = e.what;
      d["reason"] = e.reason;
      d["count"] = e.count;
      d["how"] = e.how;
      out.append(d);
    }
    return out;
  }, py::arg("n") = 256);
  m.def("_record_compile", [](const std::string& kind, const std::string& what, const std::string& reason,
                              int64_t count, const std::string& how) {
    runtime::record_compile({kind, what, reason, count, how});
  });
  m.def("_log_recompiles", [] { return runtime::log_recompiles(); });
  // Whether the tensor's storage holds a computed value (false while its
  // program is queued or deferred); never waits.
  m.def("_is_ready", [](const at::Tensor& t) {
    TORCH_CHECK(t.is_privateuseone(), "torch_tpu: _is_ready expects a tpu tensor, got one on ", t.device());
    return runtime::buffer_ready(device::storage_buffer(t.storage()).buffer);
  });
  // Opt-in CPU fallback (exec/cpu_fallback.h).
  m.def("_cpu_fallback_enabled", [] { return exec::cpu_fallback_enabled(); });
  m.def("_set_cpu_fallback", [](bool on) { exec::set_cpu_fallback(on); });
  m.def("_cpu_fallback_stats", [] { return exec::cpu_fallback_stats(); });
  m.def("_reset_cpu_fallback_stats", [] { exec::reset_cpu_fallback_stats(); });
  // Device-side check flags not read yet (runtime/deferred_checks.h).
  m.def("_pending_checks", [](int device) { return runtime::pending_check_count(device); });
  m.def("_test_invalidate_buffer", [](const at::Tensor& t) {
    TORCH_CHECK(t.is_privateuseone(), "torch_tpu: expected a tpu tensor");
    runtime::invalidate_buffer_for_test(device::storage_buffer(t.storage()).buffer);
  });
}
