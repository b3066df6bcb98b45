// The execution-mode decorator over the XLA runtime (modes.h).
//
// Every executable it compiles is an OpProgram: the inner executable plus the
// op's StableHLO text. In Strict and Debug Eager execute() runs it at once
// (Debug then waits for the outputs). In Fused Eager execute() runs nothing:
// it appends the call to the device's pending Trace and returns LazyBuffers
// naming (trace, op, output). When a value is needed (to_host, synchronize,
// mark_step, the op limit, leaving fused mode) the trace is flushed: one
// module whose @main calls each op's function in order, wiring deferred
// inputs to earlier results, with the trace's real input buffers as
// parameters and the lazy buffers still referenced as results. It is
// compiled once per trace shape (the programs, the wiring, which results are
// live), so repeated training steps reuse it.
//
// All state is touched with the runtime lock (the GIL) held.
#include <pybind11/pybind11.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hlo/ops.h"
#include "runtime/deferred_checks.h"
#include "runtime/compiler_options.h"
#include "runtime/donation.h"
#include "runtime/lru_cache.h"
#include "runtime/modes.h"
#include "runtime/profiling.h"
#include "runtime/recompile_log.h"
#include "runtime/regions.h"

namespace torch_tpu::runtime {
namespace py = pybind11;
namespace {

std::atomic<int> g_mode{-1};  // -1: not read from the environment yet
std::atomic<bool> g_split_paused{false};  // set_split_paused (modes.h)
FusionStats g_stats;
// Key hashes of the fused programs run since begin_program_window(); kept
// only once a window is open, so a process that never asks pays nothing
// per trace and keeps no set.
bool g_window_open = false;
std::unordered_set<size_t> g_window;

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// ---- per-op programs ----------------------------------------------------------

hlo::TensorType parse_type(const std::string& s) {
  // "tensor<2x3xf32>", "tensor<f32>", "tensor<4xcomplex<f32>>"
  TORCH_CHECK(s.rfind("tensor<", 0) == 0, "torch_tpu: unexpected StableHLO type ", s);
  std::string inner = s.substr(7, s.size() - 8);
  hlo::TensorType t;
  size_t start = 0, x;
  while (start < inner.size() && std::isdigit(inner[start]) && (x = inner.find('x', start)) != std::string::npos) {
    t.dims.push_back(std::stoll(inner.substr(start, x - start)));
    start = x + 1;
  }
  std::string el = inner.substr(start);
  for (int e = 0; e < hlo::kElementTypeCount; ++e)
    if (el == hlo::element_name(static_cast<hlo::ElementType>(e))) {
      t.element = static_cast<hlo::ElementType>(e);
      return t;
    }
  TORCH_CHECK(false, "torch_tpu: unknown element type ", el);
}

// In fused mode a program is compiled by XLA only if it ever runs on its own
// (a one-op trace, or later in another mode): inside traces only its text is
// used.
class OpProgram final : public Executable, public std::enable_shared_from_this<OpProgram> {
 public:
  OpProgram(Runtime& rt, ExecutableRef inner, const std::string& text, std::string what, int device)
      : rt_(rt), inner_(std::move(inner)), what_(std::move(what)), device_(device) {
    // Why the op engine built it (recompile_log.h): for a deferred compile
    // and for the reason of a fused program that uses it.
    if (const CompileNote* n = CompileNote::current()) {
      note_label_ = n->label();
      note_reason_ = n->reason();
    }
    static std::atomic<int64_t> next_id{0};
    id_ = next_id++;
    // "  func.func public @main(ARGS) -> (RESULTS) {\n" ... "  }\n}\n"
    const std::string head = "func.func public @main(";
    size_t h = text.find(head);
    TORCH_CHECK(h != std::string::npos, "torch_tpu: program for ", what_, " has no @main");
    size_t args_end = text.find(") -> (", h);
    size_t res_end = text.find(") {\n", args_end);
    size_t body_end = text.rfind("}\n}");
    TORCH_CHECK(args_end != std::string::npos && res_end != std::string::npos && body_end != std::string::npos,
                "torch_tpu: cannot read the signature of the program for ", what_);
    // Argument list entries are "%argN: TYPE".
    for (const auto& a : split_types(text.substr(h + head.size(), args_end - h - head.size())))
      in_sig_.push_back(a.substr(a.find(": ") + 2));
    out_sig_ = split_types(text.substr(args_end + 6, res_end - args_end - 6));
    for (const auto& t : out_sig_) out_types_.push_back(parse_type(t));
    func_ = "  func.func private @f" + std::to_string(id_) + "(" + text.substr(h + head.size(), body_end + 2 - h - head.size());
    if (!inner_) text_ = text;
  }
  int device() const override { return device_; }
  // The XLA executable, compiled now if it was deferred. Lock held; XLA
  // releases it while compiling, so another thread may compile it too: the
  // first result is kept, and callers hold their own reference.
  ExecutableRef inner() const {
    if (!inner_) {
      std::string text = text_;
      CompileNote note(note_label_, note_reason_);
      ExecutableRef exe = rt_.compile(text, device_, what_);
      if (!inner_) {
        inner_ = std::move(exe);
        text_.clear();
      }
    }
    return inner_;
  }
  const std::string& what() const { return what_; }
  const std::string& reason() const { return note_reason_; }
  int64_t id() const { return id_; }
  const std::vector<std::string>& in_sig() const { return in_sig_; }
  const std::vector<std::string>& out_sig() const { return out_sig_; }
  const std::vector<hlo::TensorType>& out_types() const { return out_types_; }
  // The op as a private function @f<id> of a fused module.
  const std::string& func() const { return func_; }

 private:
  Runtime& rt_;                   // the XLA runtime
  mutable ExecutableRef inner_;   // null until first needed (fused mode)
  mutable std::string text_;      // kept until then
  std::string what_;
  std::string note_label_, note_reason_;
  int device_;
  int64_t id_;
  std::vector<std::string> in_sig_, out_sig_;
  std::vector<hlo::TensorType> out_types_;
  std::string func_;
};

// ---- traces and lazy buffers ------------------------------------------------------

struct Trace;

// The output of a deferred op. Resolves to a real buffer when its trace runs.
class LazyBuffer final : public DeviceBuffer {
 public:
  LazyBuffer(hlo::TensorType type, int device, std::shared_ptr<Trace> trace, int op, int out)
      : type_(std::move(type)), device_(device), trace(std::move(trace)), op(op), out(out) {}
  const hlo::TensorType& type() const override { return type_; }
  int device() const override { return device_; }

  hlo::TensorType type_;
  int device_;
  std::shared_ptr<Trace> trace;  // while deferred
  int op, out;
  BufferRef real;                // once its trace ran
  std::string error;             // if its trace failed
  int region_arg = -1;           // a loop body's placeholder (regions.h): its input index
};

struct TraceInput {
  int param = -1;  // index into Trace::params (a real buffer) ...
  int op = -1;     // ... or output `out` of an earlier op of the trace
  int out = -1;
};

struct TraceOp {
  std::shared_ptr<const OpProgram> prog;
  std::vector<TraceInput> inputs;
  std::vector<std::weak_ptr<LazyBuffer>> outs;  // weak: an output nobody holds is not a result
};

}  // namespace

// A captured trace as a chained replay appends it (modes.h, defer_replay):
// the ops with their wiring (an input's `param` indexes the capture's
// parameters) and which outputs were its results.
struct CapturedOps {
  struct Op {
    std::shared_ptr<const OpProgram> prog;
    std::vector<TraceInput> inputs;
    std::vector<int> results;  // per output: its index among the results, or -1
  };
  std::vector<Op> ops;
  size_t num_results = 0;
};

namespace {

struct Trace {
  int device = 0;
  std::vector<TraceOp> ops;
  std::vector<BufferRef> params;  // real input buffers, each once (scalars: once per use)
  std::unordered_map<const DeviceBuffer*, int> param_index;
  // The parameter that passes `real`. A rank-0 buffer gets one per use:
  // uploaded scalars (operands, view offsets) come from a cache that shares
  // one buffer per value, so deduplicating them would make the program's
  // wiring, hence a compile, depend on which values happen to be equal
  // (`x[2] * 2` against `x[3] * 2`). Scalars are never donated
  // (kMinDonatedBytes), so a repeated one is harmless.
  int add_param(const BufferRef& real) {
    if (real->type().rank() == 0) {
      params.push_back(real);
      return static_cast<int>(params.size()) - 1;
    }
    auto [it, added] = param_index.emplace(real.get(), static_cast<int>(params.size()));
    if (added) params.push_back(real);
    return it->second;
  }
  // Chained replays appended to it: appending one again runs the trace first.
  std::vector<std::shared_ptr<const CapturedOps>> replays;
  // Compiled whole, never split (keep_trace_whole, modes.h).
  bool keep_whole = false;
  // A loop body being recorded (regions.h): never runs.
  bool region = false;
  std::string region_broken;  // why it cannot be a loop body (the first reason)
  void refuse_region(const std::string& why) {
    if (region_broken.empty()) region_broken = why;
  }
};

// A region being recorded, and what it set aside.
struct Region {
  int device = 0;
  std::thread::id thread;  // the one recording it
  std::shared_ptr<Trace> trace;
  std::shared_ptr<Trace> saved;  // the device's pending trace
  std::vector<PendingCheck> saved_checks;
};

// A capture in progress (capture_begin .. capture_end): the first trace of
// its device that runs is kept; anything else that would make a replay
// differ from the eager run marks it broken.
struct Capture {
  int device = 0;
  std::thread::id thread;
  bool have = false;       // `got` holds the trace
  bool keep_text = false;  // fill got.text even without aliases (export)
  std::string broken;      // first reason it cannot be replayed
  CapturedTrace got;
  void refuse(const std::string& why) {
    if (broken.empty()) broken = why;
  }
};

class ModeRuntime final : public Runtime {
 public:
  explicit ModeRuntime(Runtime& inner) : inner_(inner) {
    if (const char* n = std::getenv("TPU_FUSE_MAX_OPS")) max_ops_ = std::max(1, std::atoi(n));
    if (const char* n = std::getenv("TPU_FUSE_CACHE_SIZE")) fused_.set_capacity(std::max(1, std::atoi(n)));
    if (const char* n = std::getenv("TPU_REPLAY_CHAIN_MAX_OPS")) max_chain_ops_ = std::max(1, std::atoi(n));
    if (const char* v = std::getenv("TPU_FUSE_SPLIT")) split_enabled_ = std::string(v) != "0";
  }

  int device_count() override { return inner_.device_count(); }
  const PlatformInfo& platform() override { return inner_.platform(); }
  int64_t compile_count() const override { return inner_.compile_count(); }
  double compile_seconds() const override { return inner_.compile_seconds(); }

  ExecutableRef compile(const std::string& text, int device, const std::string& what) override {
    // Fused mode defers the op's own compile: it may only ever run inside
    // fused programs. (Its StableHLO was produced by the lowering, which has
    // already checked the op.)
    ExecutableRef exe;
    if (eager_mode() != EagerMode::kFused) exe = inner_.compile(text, device, what);
    return std::make_shared<OpProgram>(inner_, std::move(exe), text, what, device);
  }

  std::vector<BufferRef> execute(const Executable& exe_base, const std::vector<BufferRef>& args) override {
    const auto& prog = static_cast<const OpProgram&>(exe_base);
    RuntimeLock lock;
    EagerMode mode = eager_mode();
    if (const Region* r = recording(prog.device())) {
      mode = EagerMode::kFused;  // a loop body is recorded, whatever the mode
      // Another thread's op would land in the body (its values then raise).
      if (std::this_thread::get_id() != r->thread)
        r->trace->refuse_region("another thread ran tpu ops while the loop body was recorded");
    } else if (capture_) {
      if (std::this_thread::get_id() != capture_->thread)
        capture_->refuse("another thread ran tpu ops while the graph was captured");
      else if (mode != EagerMode::kFused)
        capture_->refuse("an op ran outside Fused Eager");
    }
    if (mode != EagerMode::kFused) {
      std::vector<BufferRef> real;
      real.reserve(args.size());
      for (const auto& a : args) real.push_back(resolve(a));
      ProgramRange range;  // torch.profiler (profiling.h)
      if (range.active()) range.start(prog.what());
      auto outs = inner_.execute(*prog.inner(), real);
      range.finish(outs);
      if (mode == EagerMode::kDebug) {
        for (const auto& o : outs) xla_buffer_wait(*o, prog.what().c_str());
      } else {
        track(prog.device(), outs);
      }
      return outs;
    }
    auto& slot = pending_[prog.device()];
    if (!slot) {
      slot = std::make_shared<Trace>();
      slot->device = prog.device();
    }
    std::shared_ptr<Trace> trace = slot;
    TraceOp op;
    op.prog = prog.shared_from_this();
    op.inputs.reserve(args.size());
    for (const auto& a : args) {
      auto* lazy = dynamic_cast<LazyBuffer*>(a.get());
      if (lazy != nullptr && lazy->trace == trace) {
        op.inputs.push_back(TraceInput{-1, lazy->op, lazy->out});
        continue;
      }
      // A loop body's placeholder, or a value of the trace set aside:
      // parameters of the body, never computed here.
      if (trace->region && lazy != nullptr && (lazy->trace || lazy->region_arg >= 0)) {
        op.inputs.push_back(TraceInput{trace->add_param(a), -1, -1});
        continue;
      }
      op.inputs.push_back(TraceInput{trace->add_param(resolve(a)), -1, -1});
    }
    int index = static_cast<int>(trace->ops.size());
    std::vector<BufferRef> outs;
    const auto& types = prog.out_types();
    for (size_t i = 0; i < types.size(); ++i) {
      auto b = std::make_shared<LazyBuffer>(types[i], prog.device(), trace, index, static_cast<int>(i));
      op.outs.push_back(b);
      outs.push_back(std::move(b));
    }
    trace->ops.push_back(std::move(op));
    ++g_stats.pending_ops;
    // A bound on program size (and on how long values stay deferred).
    if (!trace->region && static_cast<int>(trace->ops.size()) >= max_ops_) flush(prog.device());
    return outs;
  }

  BufferRef to_device(const void* data, const hlo::TensorType& type, int device) override {
    return inner_.to_device(data, type, device);
  }

  // In every mode at once (a fill the op engine would otherwise have made
  // a program for; Fused Eager keeps fills in its traces instead).
  BufferRef filled(const hlo::TensorType& type, const void* element, int device) override {
    RuntimeLock lock;
    BufferRef b = inner_.filled(type, element, device);
    track(device, {b});  // a transfer on an accelerator: synchronize waits for it
    return b;
  }

  void to_host(const BufferRef& buf, void* dst, size_t nbytes) override {
    BufferRef real;
    {
      RuntimeLock lock;
      // The graph depends on a value read on the host: a replay would reuse it.
      if (capture_) capture_->refuse("a value was read on the host (.item(), a data-dependent shape, a print)");
      real = resolve(buf);
    }
    inner_.to_host(real, dst, nbytes);
    if (checks_pending()) check_flags(buf->device());  // the host waited: report what the device found
  }

  void synchronize(int device) override {
    // One lock for the whole sync: jax releases it while it blocks.
    RuntimeLock lock;
    flush(device);
    std::vector<BufferRef> wait;
    auto& flying = in_flight(device);
    wait.reserve(flying.size());
    for (auto& w : flying)
      if (auto b = w.lock()) wait.push_back(std::move(b));
    flying.clear();
    // XLA:CPU runs independent programs concurrently (there is no single
    // in-order stream), so waiting for a transfer queued behind them is not
    // enough: wait for every program output that is still referenced (in
    // one call), which is everything a queued program leaves behind.
    xla_buffers_wait(wait, "a queued program");
    inner_.synchronize(device);
    if (checks_pending()) check_flags(device);
  }

  // Reads the computed check flags of `device` (deferred_checks.h) and
  // raises the first failed one's error. Flags still deferred in a trace
  // wait for a later sync (reading them would run their trace early); the
  // flag of a trace that failed is dropped (its values raise that error).
  void check_flags(int device) {
    RuntimeLock lock;
    std::vector<PendingCheck> all = take_checks(device), keep;
    bool deferred = eager_mode() != EagerMode::kDebug;
    std::vector<BufferRef> ready;  // the computed flags, in order ...
    std::vector<size_t> where;     // ... and their place in `all`
    for (size_t i = 0; i < all.size(); ++i) {
      BufferRef real = all[i].flag;
      if (auto* lazy = dynamic_cast<LazyBuffer*>(real.get())) {
        if (lazy->trace) {
          keep.push_back(all[i]);
          continue;
        }
        if (!lazy->error.empty() || !lazy->real) continue;
        real = lazy->real;
      }
      ready.push_back(std::move(real));
      where.push_back(i);
    }
    auto [first, value] = first_failed(ready, device);
    restore_checks(device, std::move(keep));
    if (first >= 0) all[where[first]].check->raise(value, deferred);
  }

  // The first failed flag of `flags` (computed buffers of `device`): its
  // position and value, or -1. Up to kFlagsReadAlone flags are read one by
  // one (16 bytes each); more are reduced on the device, up to
  // kFlagsPerRead in one small program, so a sync after n checking ops
  // reads once, not n times. A few reads cost tens of us; the program's
  // compile, on the first sync of a process (a training step's few index
  // checks), costs 0.2-0.5 s.
  static constexpr size_t kFlagsPerRead = 64;
  static constexpr size_t kFlagsReadAlone = 4;
  std::pair<int64_t, int64_t> first_failed(const std::vector<BufferRef>& flags, int device) {
    for (size_t start = 0; start < flags.size(); start += kFlagsPerRead) {
      size_t n = std::min(kFlagsPerRead, flags.size() - start);
      int64_t v[2] = {0, 0};
      if (n <= kFlagsReadAlone) {
        for (size_t i = start; i < start + n; ++i) {
          inner_.to_host(flags[i], v, sizeof(v));
          if (v[0] != 0) return {static_cast<int64_t>(i), v[1]};
        }
        continue;
      }
      // Padded with a flag that never fails to one of two sizes, so at most
      // two programs are ever compiled per device.
      int bucket = n <= 16 ? 16 : static_cast<int>(kFlagsPerRead);
      std::vector<BufferRef> args(flags.begin() + start, flags.begin() + start + n);
      args.resize(bucket, passing_flag(device));
      auto out = inner_.execute(*flags_program(bucket, device), args);
      inner_.to_host(out.at(0), v, sizeof(v));
      if (v[0] < static_cast<int64_t>(n)) return {static_cast<int64_t>(start) + v[0], v[1]};
    }
    return {-1, 0};
  }

  // [position of the first failed of `n` flags (n: none), its value].
  ExecutableRef flags_program(int n, int device) {
    std::string key = std::to_string(device) + ':' + std::to_string(n);
    auto it = flag_programs_.find(key);
    if (it != flag_programs_.end()) return it->second;
    using hlo::ElementType;
    hlo::Builder b;
    std::vector<hlo::Value> rows;
    for (int i = 0; i < n; ++i) rows.push_back(hlo::reshape(b.parameter(hlo::TensorType{ElementType::kI64, {2}}), {1, 2}));
    hlo::Value all = hlo::concatenate(rows, 0);
    hlo::Value failed = hlo::reshape(hlo::slice(all, {0, 0}, {n, 1}), {n});
    hlo::Value value = hlo::reshape(hlo::slice(all, {0, 1}, {n, 2}), {n});
    hlo::Value pos = hlo::iota(b, ElementType::kI64, {n}, 0);
    hlo::Value marked = hlo::select(hlo::compare(failed, hlo::zeros_like(failed), "NE"), pos,
                                    hlo::full(b, ElementType::kI64, {n}, static_cast<double>(n)));
    hlo::Value first = hlo::reduce(marked, {0}, hlo::ReduceKind::kMin);
    hlo::Value at_first = hlo::compare(pos, hlo::broadcast_to(first, {n}), "EQ");
    hlo::Value v = hlo::reduce(hlo::select(at_first, value, hlo::zeros_like(value)), {0}, hlo::ReduceKind::kSum);
    hlo::Value out = hlo::concatenate({hlo::reshape(first, {1}), hlo::reshape(v, {1})}, 0);
    CompileNote note("(reading deferred-check flags)", "");
    ExecutableRef exe = inner_.compile(b.module_text({out}), device, "check flags x" + std::to_string(n));
    flag_programs_.emplace(key, exe);
    return exe;
  }

  BufferRef passing_flag(int device) {
    auto it = passing_flags_.find(device);
    if (it != passing_flags_.end()) return it->second;
    int64_t zero[2] = {0, 0};
    BufferRef b = inner_.to_device(zero, hlo::TensorType{hlo::ElementType::kI64, {2}}, device);
    passing_flags_.emplace(device, b);
    return b;
  }

  // Runs the deferred ops of `device`. Called with the lock held.
  void flush(int device) {
    auto it = pending_.find(device);
    if (it == pending_.end() || !it->second) return;
    if (it->second->region) {  // a loop body never runs on its own
      it->second->refuse_region("the loop body synchronized or marked a step");
      return;
    }
    std::shared_ptr<Trace> trace = std::move(it->second);
    pending_.erase(it);  // ops issued from here on start a new trace
    g_stats.pending_ops -= static_cast<int64_t>(trace->ops.size());
    run_trace(*trace);
  }

  void flush_all() {
    std::vector<int> devices;
    for (const auto& [d, t] : pending_) devices.push_back(d);
    for (int d : devices) flush(d);
  }

  // A real buffer for `buf`, running its trace if it is deferred.
  BufferRef resolve(const BufferRef& buf) {
    auto* lazy = dynamic_cast<LazyBuffer*>(buf.get());
    if (lazy == nullptr) return buf;
    if (lazy->trace && lazy->trace->region) {
      lazy->trace->refuse_region("the loop body read a value on the host");
      TORCH_CHECK(false, "torch_tpu: a loop body read a tensor's value on the host");
    }
    TORCH_CHECK(lazy->region_arg < 0, "torch_tpu: internal error: a loop body's placeholder was read outside its body");
    if (lazy->trace) {
      auto it = pending_.find(lazy->device());
      if (it != pending_.end() && it->second == lazy->trace) {
        flush(lazy->device());
      } else {
        // Another thread is running its trace (XLA released the lock while
        // compiling or running it): wait for that to finish.
        while (lazy->trace) {
          py::gil_scoped_release unlock;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
    }
    TORCH_CHECK(lazy->error.empty(), lazy->error);
    TORCH_CHECK(lazy->real, "torch_tpu: internal error: deferred value was not computed");
    return lazy->real;
  }

  void capture_begin(int device, bool keep_text) {
    TORCH_CHECK(!capture_, "torch_tpu: internal error: nested graph capture");
    flush_all();
    capture_ = std::make_unique<Capture>();
    capture_->device = device;
    capture_->keep_text = keep_text;
    capture_->thread = std::this_thread::get_id();
  }

  CapturedTrace capture_end() {
    TORCH_CHECK(capture_, "torch_tpu: internal error: capture_end without capture_begin");
    // Whatever the graph left deferred belongs to its trace. Keep watching
    // while it runs, so a second trace still counts.
    try {
      flush_all();
    } catch (...) {
      capture_.reset();
      throw;
    }
    std::unique_ptr<Capture> c = std::move(capture_);
    CapturedTrace out = std::move(c->got);
    if (!c->broken.empty()) {
      out = CapturedTrace{};
      out.refused = c->broken;
    }
    return out;
  }

  void capture_abort() { capture_.reset(); }
  bool capture_active() const { return capture_ != nullptr; }

  ExecutableRef compile_with_aliases(const std::string& text, const Aliases& aliases, int device) {
    std::string key = "variant:" + std::to_string(device) + ':' + std::to_string(compiler_options_id()) + ':' +
                      std::to_string(std::hash<std::string>{}(text));
    append_aliases(key, aliases);
    if (ExecutableRef* hit = fused_.find(key)) return *hit;
    CompileNote note("(replay)", "the replay donates fewer buffers than its capture");
    ExecutableRef exe = inner_.compile(with_aliases(text, aliases), device, "replayed graph");
    fused_.put(key, exe);
    return exe;
  }

  // A buffer of `type` whose contents are never read: a recycled one, else
  // a new one made on the host (Runtime::filled: no program per type to
  // compile; on XLA:CPU its untouched pages cost nothing until the program
  // writes them, as XLA's own fresh output would).
  BufferRef recycled_or_new(const hlo::TensorType& type, int device) {
    if (BufferRef b = take_recycled(type, device)) return b;
    return inner_.filled(type, nullptr, device);
  }

  std::vector<BufferRef> defer_replay(const std::shared_ptr<const CapturedOps>& cops,
                                      const std::vector<BufferRef>& params, int device) {
    if (const Region* r = recording(device)) r->trace->refuse_region("a compiled graph ran in the loop body");
    if (auto it = pending_.find(device); it != pending_.end() && it->second) {
      const Trace& t = *it->second;
      bool again = std::find(t.replays.begin(), t.replays.end(), cops) != t.replays.end();
      // One step's graphs per program: the same graph again starts the next
      // step (and so a loop of identical steps builds identical traces).
      if (again || (!t.ops.empty() && t.ops.size() + cops->ops.size() > static_cast<size_t>(max_chain_ops_)) ||
          links_too_large(t, params))
        flush(device);
    }
    auto& slot = pending_[device];
    if (!slot) {
      slot = std::make_shared<Trace>();
      slot->device = device;
    }
    std::shared_ptr<Trace> trace = slot;
    trace->replays.push_back(cops);
    const int base = static_cast<int>(trace->ops.size());
    // Each parameter's place in this trace, found on first use: an output
    // of an op already in it (the forward's activations for the backward),
    // else a real buffer among its parameters.
    std::vector<TraceInput> where(params.size());
    std::vector<bool> mapped(params.size(), false);
    auto map_param = [&](int p) -> const TraceInput& {
      if (!mapped[p]) {
        mapped[p] = true;
        const BufferRef& a = params[p];
        TORCH_CHECK(a, "torch_tpu: internal error: chained replay without parameter ", p);
        auto* lazy = dynamic_cast<LazyBuffer*>(a.get());
        if (lazy != nullptr && lazy->trace == trace) {
          where[p] = TraceInput{-1, lazy->op, lazy->out};
        } else {
          where[p] = TraceInput{trace->add_param(resolve(a)), -1, -1};
        }
      }
      return where[p];
    };
    std::vector<BufferRef> results(cops->num_results);
    trace->ops.reserve(trace->ops.size() + cops->ops.size());
    for (size_t k = 0; k < cops->ops.size(); ++k) {
      const auto& cop = cops->ops[k];
      TraceOp op;
      op.prog = cop.prog;
      op.inputs.reserve(cop.inputs.size());
      for (const auto& in : cop.inputs)
        op.inputs.push_back(in.param >= 0 ? map_param(in.param) : TraceInput{-1, base + in.op, in.out});
      // Only the results get buffers: the other outputs were intermediates
      // of the captured call, and stay inside the program.
      op.outs.resize(cop.results.size());
      const auto& types = cop.prog->out_types();
      for (size_t i = 0; i < cop.results.size(); ++i) {
        if (cop.results[i] < 0) continue;
        auto b = std::make_shared<LazyBuffer>(types[i], device, trace, base + static_cast<int>(k), static_cast<int>(i));
        op.outs[i] = b;
        results[cop.results[i]] = std::move(b);
      }
      trace->ops.push_back(std::move(op));
    }
    g_stats.pending_ops += static_cast<int64_t>(cops->ops.size());
    ++g_stats.chained_replays;
    return results;
  }

  // Whether this replay reads so many bytes of the pending trace's results
  // that chaining it would cost more than it saves. Chained, those values
  // (a forward's activations, a backward's gradients) become temporaries
  // of one program, and XLA:CPU allocates temporaries afresh at every run:
  // above glibc's largest mmap threshold (32 MiB) each run faults them in
  // page by page, where separate programs write them into recycled buffers
  // (GPT-2-shaped step: 740 ms one program, 590 ms three; docs/design.md,
  // "Host memory on XLA:CPU"). Never on a chip, nor when malloc keeps freed
  // memory; TPU_REPLAY_CHAIN_MAX_LINK_BYTES sets the bound (0: none).
  int64_t max_link_bytes() {
    if (max_link_bytes_ < 0) {
      const PlatformInfo& info = inner_.platform();
      max_link_bytes_ = info.is_cpu() && !info.host_memory_kept ? (int64_t{32} << 20) : 0;
      if (const char* n = std::getenv("TPU_REPLAY_CHAIN_MAX_LINK_BYTES")) max_link_bytes_ = std::max(0LL, std::atoll(n));
    }
    return max_link_bytes_;
  }
  int64_t set_max_link_bytes(int64_t bytes) {
    int64_t prev = max_link_bytes();
    max_link_bytes_ = std::max<int64_t>(0, bytes);
    return prev;
  }

  bool links_too_large(const Trace& t, const std::vector<BufferRef>& params) {
    if (max_link_bytes() == 0) return false;
    int64_t bytes = 0;
    std::unordered_set<const DeviceBuffer*> seen;
    for (const auto& p : params) {
      auto* lazy = dynamic_cast<LazyBuffer*>(p.get());
      if (lazy == nullptr || lazy->trace.get() != &t || !seen.insert(lazy).second) continue;
      bytes += lazy->type().numel() * hlo::element_bits(lazy->type().element) / 8;
    }
    if (bytes < max_link_bytes_) return false;
    ++g_stats.chain_cuts;
    return true;
  }

  std::vector<BufferRef> execute_now(const Executable& exe, const std::vector<BufferRef>& args) {
    RuntimeLock lock;
    ProgramRange range;  // torch.profiler (profiling.h)
    if (range.active()) range.start("replayed graph");
    auto outs = inner_.execute(exe, args);
    range.finish(outs);
    if (eager_mode() == EagerMode::kDebug) {
      for (const auto& o : outs) xla_buffer_wait(*o, "a replayed graph");
    } else {
      track(exe.device(), outs);
    }
    return outs;
  }

  // ---- loop bodies (regions.h) ----
  void region_begin(int device) {
    Region r;
    r.device = device;
    r.thread = std::this_thread::get_id();
    if (auto it = pending_.find(device); it != pending_.end()) {
      r.saved = std::move(it->second);
      pending_.erase(it);
    }
    r.saved_checks = take_checks(device);
    r.trace = std::make_shared<Trace>();
    r.trace->device = device;
    r.trace->region = true;
    pending_[device] = r.trace;
    regions_.push_back(std::move(r));
  }

  RegionTrace region_end(int device, const std::vector<BufferRef>& outputs) {
    Region r = pop_region(device);
    std::vector<PendingCheck> flags = take_checks(device);
    restore_checks(device, std::move(r.saved_checks));
    const Trace& t = *r.trace;
    RegionTrace out;
    out.refused = t.region_broken;
    std::vector<BufferRef> results = outputs;
    for (auto& f : flags) {  // the checks' flags become results too (regions.h)
      results.push_back(f.flag);
      out.checks.push_back(f.check);
    }
    std::vector<std::shared_ptr<LazyBuffer>> live;
    for (const auto& o : results) {
      if (!out.refused.empty()) break;
      auto lazy = std::dynamic_pointer_cast<LazyBuffer>(o);
      if (!lazy || lazy->trace != r.trace) out.refused = "a result of the loop body is not computed by it";
      else live.push_back(std::move(lazy));
    }
    if (out.refused.empty()) {
      out.text = module_text(t, live);
      for (const auto& p : t.params) {
        auto* lazy = dynamic_cast<LazyBuffer*>(p.get());
        int arg = lazy != nullptr ? lazy->region_arg : -1;
        out.param_arg.push_back(arg);
        out.param_types.push_back(p->type());
        if (arg < 0) {
          out.outside_scalar.push_back(p->type().rank() == 0);
          out.outside.push_back(as_array(p));
        }
      }
      for (const auto& b : live) out.result_types.push_back(b->type());
    }
    forget_region(r);
    return out;
  }

  // Values reach the loop as tensors, whose storages hold 1-D buffers; an
  // uploaded scalar operand (rank 0, made on the host) is uploaded again as
  // a one-element array (read through the XLA runtime itself: not a value
  // read by the graph, so a capture around the loop stays replayable).
  BufferRef as_array(const BufferRef& p) {
    if (p->type().rank() == 1) return p;
    auto* lazy = dynamic_cast<LazyBuffer*>(p.get());
    TORCH_CHECK(lazy == nullptr || lazy->real, "torch_tpu: internal error: a loop body read a deferred ",
                p->type().str());
    BufferRef real = lazy != nullptr ? lazy->real : p;
    std::vector<uint8_t> bytes(byte_size(real->type()));
    inner_.to_host(real, bytes.data(), bytes.size());
    return inner_.to_device(bytes.data(), hlo::TensorType{real->type().element, {real->type().numel()}}, p->device());
  }

  void region_abort(int device) {
    Region r = pop_region(device);
    take_checks(device);
    restore_checks(device, std::move(r.saved_checks));
    forget_region(r);
  }

  void keep_whole(int device) {
    auto it = pending_.find(device);
    if (it != pending_.end() && it->second) it->second->keep_whole = true;
  }

 private:
  void run_trace(Trace& t) {
    // Parameters only the trace holds: dead once it has run (their storage
    // was given a new buffer, or died), so their memory can take results.
    // Small ones are not worth a program variant.
    std::vector<bool> dead(t.params.size());
    for (size_t p = 0; p < t.params.size(); ++p) {
      dead[p] = t.params[p].use_count() == 1 && byte_size(t.params[p]->type()) >= kMinDonatedBytes;
    }
    // Results: outputs still referenced outside the trace.
    std::vector<std::shared_ptr<LazyBuffer>> live;
    std::string key = std::to_string(t.device) + ':';
    // The options in force when the trace runs decide its program (compiler_options.h).
    if (uint32_t options = compiler_options_id()) key += 'x' + std::to_string(options) + ':';
    for (const auto& op : t.ops) {
      key += std::to_string(op.prog->id());
      key += '(';
      for (const auto& in : op.inputs) {
        if (in.param >= 0) {
          key += 'p' + std::to_string(in.param);
        } else {
          key += 'o' + std::to_string(in.op) + '.' + std::to_string(in.out);
        }
        key += ',';
      }
      key += ')';
      for (const auto& w : op.outs) {
        auto b = w.lock();
        key += b ? 'L' : '-';
        if (b) live.push_back(std::move(b));
      }
    }
    ++g_stats.flushes;
    g_stats.fused_ops += static_cast<int64_t>(t.ops.size());
    if (split_if_unstable(t, key, live)) return;
    auto fail = [&](const std::string& msg) {
      for (auto& b : live) {
        b->error = msg;
        b->trace.reset();
      }
    };
    const std::string wiring = key;  // the key without the donation pairs
    Aliases aliases = place_results(t, live, dead);
    append_aliases(key, aliases);
    // A capture keeps the first trace of its device; a second one (a flush
    // in the middle of the graph) or another device's makes it unreplayable.
    CapturedTrace* keep = nullptr;
    if (capture_) {
      if (capture_->have || t.device != capture_->device) {
        capture_->refuse("the graph ran as more than one program (a value read on the host, TPU_FUSE_MAX_OPS, "
                         "or several devices)");
      } else {
        capture_->have = true;
        keep = &capture_->got;
        keep->params = t.params;
        if (capture_->keep_text) keep->text = module_text(t, live);
        keep->ops = captured_ops(t, live);
      }
    }
    if (live.empty()) {  // nothing observable: the trace need not run
      ++g_stats.skipped;
      return;
    }
    if (recording_programs()) note_program(describe(t), module_text(t, live));  // torch_tpu.estimate
    ProgramRange range;  // torch.profiler (profiling.h)
    if (range.active()) range.start(t.ops.size() == 1 ? t.ops[0].prog->what() : describe(t));
    std::vector<BufferRef> outs;
    try {
      if (t.ops.size() == 1) {
        // One op: its own program, with its arguments in order.
        std::vector<BufferRef> args;
        for (const auto& in : t.ops[0].inputs) args.push_back(t.params[in.param]);
        ExecutableRef exe = t.ops[0].prog->inner();
        auto all = inner_.execute(*exe, args);
        for (size_t i = 0; i < t.ops[0].outs.size(); ++i)
          if (!t.ops[0].outs[i].expired()) {
            outs.push_back(all[i]);
            if (keep) keep->exe_outputs.push_back(static_cast<int>(i));
          }
        if (keep) {
          keep->exe = std::move(exe);
          for (const auto& in : t.ops[0].inputs) keep->exe_args.push_back(in.param);
        }
      } else {
        ExecutableRef exe;
        if (g_window_open && g_window.insert(std::hash<std::string>{}(key)).second)
          g_stats.window_programs = g_window.size();
        if (ExecutableRef* hit = fused_.find(key)) {
          ++g_stats.cache_hits;
          exe = *hit;
        } else {
          ++g_stats.compiles;
          size_t key_hash = std::hash<std::string>{}(key);
          if (fused_keys_.count(key_hash)) {
            // Evicted from the LRU and needed again: not a recompile.
            CompileNote note("(reloaded: evicted from the fused program cache)", "");
            exe = inner_.compile(with_aliases(module_text(t, live), aliases), t.device, describe(t));
          } else {
            std::string what = describe(t);
            auto [count, reason] = explain(t);
            int64_t before = inner_.compile_count();
            {
              CompileNote note("(#" + std::to_string(count) + " for this op sequence)", reason);
              exe = inner_.compile(with_aliases(module_text(t, live), aliases), t.device, what);
            }
            if (fused_keys_.size() > 65536) fused_keys_.clear();  // a bound: only decides the wording
            fused_keys_.insert(key_hash);
            if (wirings_.size() > 65536) wirings_.clear();  // a bound: only decides whether to split
            wirings_.insert(std::hash<std::string>{}(wiring));
            record_compile({"fused", what, reason, count, inner_.compile_count() != before ? "compile" : "load"});
          }
          fused_.put(key, exe);  // keeps the TPU_FUSE_CACHE_SIZE most recent (lru_cache.h says why)
        }
        outs = inner_.execute(*exe, t.params);
        if (keep) {
          keep->exe = exe;
          keep->aliases = aliases;
          for (const auto& a : aliases)
            if (a.first >= static_cast<int>(dead.size())) keep->donors.push_back(a.first);
          // A replay may donate fewer parameters: it recompiles from this.
          if (!aliases.empty()) keep->text = module_text(t, live);
          for (size_t i = 0; i < t.params.size(); ++i) keep->exe_args.push_back(static_cast<int>(i));
          for (size_t i = 0; i < live.size(); ++i) keep->exe_outputs.push_back(static_cast<int>(i));
        }
      }
    } catch (const std::exception& e) {
      std::string msg = std::string("torch_tpu: running the deferred ops (") + describe(t) +
                        ") failed; the error belongs to one of them (TPU_LAUNCH_BLOCKING=1 or "
                        "torch_tpu.eager_mode(\"debug\") finds which): " + e.what();
      fail(msg);
      TORCH_CHECK(false, msg);
    }
    TORCH_CHECK(outs.size() == live.size(), "torch_tpu: internal error: fused program returned ", outs.size(),
                " values for ", live.size(), " live results");
    range.finish(outs);
    track(t.device, outs);
    if (keep) keep->results.assign(live.begin(), live.end());
    for (size_t i = 0; i < live.size(); ++i) {
      live[i]->real = std::move(outs[i]);
      live[i]->trace.reset();
    }
  }

  // A trace that recurs with a few of its ops running other programs (a
  // decode step: the ops reading a buffer that grows by one token, a KV
  // cache's torch.cat and the attention over it) would compile a whole new
  // fused program every time. When its op sequence was compiled before, no
  // compiled program has its wiring, and at most half of its ops changed
  // program since the last time the sequence ran, it runs split instead, in
  // trace order: each changed op alone (its own program, compiled once per
  // size as in Strict Eager) and each run of unchanged ops between them as
  // one fused sub-trace, whose program the next step finds in the cache.
  // Sizes stay exact (no padding), so the results are Strict Eager's.
  // A trace's op sequence: the hash of its ops' names (the key of
  // sequences_) and the program each op runs, in order.
  static std::pair<size_t, std::vector<int64_t>> op_sequence(const Trace& t) {
    std::string names;
    std::vector<int64_t> ids;
    for (const auto& op : t.ops) {
      names += op.prog->what();
      names += ';';
      ids.push_back(op.prog->id());
    }
    return {std::hash<std::string>{}(names), std::move(ids)};
  }

  bool split_if_unstable(Trace& t, const std::string& wiring,
                         const std::vector<std::shared_ptr<LazyBuffer>>& live) {
    if (!split_enabled_ || g_split_paused.load() || split_off_ || capture_ || !t.replays.empty() || t.keep_whole ||
        t.ops.size() < 4 || live.empty())
      return false;
    if (wirings_.count(std::hash<std::string>{}(wiring))) return false;  // compiled whole before
    auto [sig, ids] = op_sequence(t);
    auto it = sequences_.find(sig);
    if (it == sequences_.end() || it->second.count == 0 || it->second.ids.size() != ids.size()) return false;
    std::vector<bool> changed(ids.size());
    size_t n_changed = 0;
    for (size_t k = 0; k < ids.size(); ++k)
      if (ids[k] != it->second.ids[k]) changed[k] = true, ++n_changed;
    if (n_changed == 0 || 2 * n_changed > ids.size()) return false;
    it->second.ids = std::move(ids);  // the next step compares with this one
    ++g_stats.split_traces;
    run_split(t, changed);
    return true;
  }

  void run_split(Trace& t, const std::vector<bool>& changed) {
    const size_t n = t.ops.size();
    std::vector<int> seg(n);
    std::vector<size_t> start;  // first op of each segment
    for (size_t k = 0; k < n; ++k) {
      if (k == 0 || changed[k] || changed[k - 1]) start.push_back(k);
      seg[k] = static_cast<int>(start.size()) - 1;
    }
    // Outputs a later segment reads are held here (a new lazy buffer where
    // nothing outside holds one), so that their segment returns them.
    std::vector<std::vector<std::shared_ptr<LazyBuffer>>> held(n);
    for (size_t k = 0; k < n; ++k)
      for (const auto& in : t.ops[k].inputs) {
        if (in.op < 0 || seg[in.op] == seg[k]) continue;
        auto& h = held[in.op];
        if (h.empty()) h.resize(t.ops[in.op].outs.size());
        if (h[in.out]) continue;
        h[in.out] = t.ops[in.op].outs[in.out].lock();
        if (!h[in.out]) {
          h[in.out] = std::make_shared<LazyBuffer>(t.ops[in.op].prog->out_types()[in.out], t.device, nullptr,
                                                    in.op, in.out);
        }
      }
    // Build every sub-trace first, then drop the whole trace's references to
    // its parameters, so that a parameter is dead (donatable) in the last
    // segment that reads it, as in the unsplit program.
    std::vector<std::shared_ptr<Trace>> subs;
    for (size_t s = 0; s < start.size(); ++s) {
      size_t end = s + 1 < start.size() ? start[s + 1] : n;
      auto sub = std::make_shared<Trace>();
      sub->device = t.device;
      auto param = [&](const BufferRef& b) { return TraceInput{sub->add_param(b), -1, -1}; };
      for (size_t k = start[s]; k < end; ++k) {
        TraceOp op;
        op.prog = t.ops[k].prog;
        for (const auto& in : t.ops[k].inputs) {
          if (in.param >= 0) {
            op.inputs.push_back(param(t.params[in.param]));
          } else if (seg[in.op] == static_cast<int>(s)) {
            op.inputs.push_back(TraceInput{-1, in.op - static_cast<int>(start[s]), in.out});
          } else {
            op.inputs.push_back(param(held[in.op][in.out]));  // a lazy buffer: resolved before the run
          }
        }
        for (size_t i = 0; i < t.ops[k].outs.size(); ++i) {
          if (!held[k].empty() && held[k][i]) {
            held[k][i]->op = static_cast<int>(k - start[s]);  // run_trace reads live results' (op, out)
            op.outs.push_back(held[k][i]);
          } else {
            auto b = t.ops[k].outs[i].lock();
            if (b) b->op = static_cast<int>(k - start[s]);
            op.outs.push_back(t.ops[k].outs[i]);
          }
        }
        sub->ops.push_back(std::move(op));
      }
      subs.push_back(std::move(sub));
    }
    t.params.clear();
    t.param_index.clear();
    g_stats.flushes -= 1;  // counted per sub-trace below
    g_stats.fused_ops -= static_cast<int64_t>(n);
    split_off_ = true;
    std::string error;
    for (auto& sub : subs) {
      if (error.empty()) {
        for (auto& p : sub->params) {
          auto* lazy = dynamic_cast<LazyBuffer*>(p.get());
          if (lazy == nullptr) continue;
          if (!lazy->error.empty() || !lazy->real) {
            error = lazy->error.empty() ? "torch_tpu: internal error: split trace input not computed" : lazy->error;
            break;
          }
          p = lazy->real;
        }
      }
      if (error.empty()) {
        try {
          run_trace(*sub);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      if (!error.empty()) {  // this and every later segment: their values raise it
        for (auto& op : sub->ops)
          for (auto& w : op.outs)
            if (auto b = w.lock(); b && !b->real) {
              b->error = error;
              b->trace.reset();
            }
      }
      sub.reset();  // its parameters: dead once no later segment holds them
    }
    split_off_ = false;
    TORCH_CHECK(error.empty(), error);
  }

  // Why a trace needs a new fused program: compared with the previous
  // compile of the same op sequence (by name), the first op that now runs
  // another program, with the reason that program was built. Returns this
  // program's number for the sequence and the reason.
  std::pair<int64_t, std::string> explain(const Trace& t) {
    auto [sig, ids] = op_sequence(t);
    if (sequences_.size() > 4096) sequences_.clear();  // a bound: reasons and splitting only
    auto& seen = sequences_[sig];
    std::string reason;
    if (seen.count == 0) {
      reason = "new op sequence (" + std::to_string(t.ops.size()) + " ops)";
    } else {
      size_t first = ids.size(), differ = 0;
      for (size_t k = 0; k < ids.size() && k < seen.ids.size(); ++k)
        if (ids[k] != seen.ids[k] && differ++ == 0) first = k;
      if (differ == 0) {
        reason = "same op programs, other inputs wiring or live results";
      } else {
        const auto& p = *t.ops[first].prog;
        reason = "op " + std::to_string(first) + " of " + std::to_string(ids.size()) + " (" + p.what() +
                 ") runs another program";
        if (!p.reason().empty()) reason += " (" + p.reason() + ")";
        // The next few differing ops too: a step of a decode loop usually
        // differs in several (each view of a growing buffer), and the first
        // alone hides which of them remain.
        int listed = 0;
        for (size_t k = first + 1; k < ids.size() && k < seen.ids.size() && listed < 3; ++k) {
          if (ids[k] == seen.ids[k]) continue;
          const auto& q = *t.ops[k].prog;
          reason += "; op " + std::to_string(k) + " (" + q.what() + ")";
          if (!q.reason().empty()) reason += " (" + q.reason() + ")";
          ++listed;
        }
        if (differ > 1 + static_cast<size_t>(listed))
          reason += "; " + std::to_string(differ - 1 - listed) + " more ops differ";
      }
    }
    seen.ids = std::move(ids);
    return {++seen.count, reason};
  }

  // "fused program of N ops: aten::mm x3, aten::add.Tensor, ..." (first few).
  static std::string describe(const Trace& t) {
    std::map<std::string, int> counts;
    std::vector<std::string> order;
    for (const auto& op : t.ops)
      if (counts[op.prog->what()]++ == 0) order.push_back(op.prog->what());
    std::string s = "fused program of " + std::to_string(t.ops.size()) + " ops: ";
    for (size_t i = 0; i < order.size() && i < 12; ++i) {
      if (i) s += ", ";
      s += order[i];
      if (counts[order[i]] > 1) s += " x" + std::to_string(counts[order[i]]);
    }
    if (order.size() > 12) s += ", ...";
    return s;
  }

  // Where a fused program writes its large results (donation.h): into a
  // dead parameter of the same type, else into a recycled buffer appended
  // as an extra parameter (a fresh one while none is free, so that the
  // program does not depend on what happens to be free). Returns the
  // (parameter, result) pairs; one-op traces run the op's own program.
  Aliases place_results(Trace& t, const std::vector<std::shared_ptr<LazyBuffer>>& live, const std::vector<bool>& dead) {
    if (t.ops.size() < 2 || live.empty()) return {};
    // Most small traces have nothing to place: skip building the signature.
    bool any = std::find(dead.begin(), dead.end(), true) != dead.end();
    for (size_t r = 0; r < live.size() && !any; ++r) any = recycles(live[r]->type());
    if (!any) return {};
    auto [param_types, result_types] = signature(t, live);
    Aliases aliases = pick_aliases(dead, param_types, result_types);
    std::vector<bool> placed(live.size(), false);
    for (const auto& a : aliases) placed[a.second] = true;
    for (size_t r = 0; r < live.size(); ++r) {
      const hlo::TensorType& type = live[r]->type();
      if (placed[r] || !recycles(type)) continue;
      BufferRef b = recycled_or_new(type, t.device);
      aliases.emplace_back(static_cast<int>(t.params.size()), static_cast<int>(r));
      t.params.push_back(std::move(b));
    }
    g_stats.donated += static_cast<int64_t>(aliases.size());
    return aliases;
  }

  // What a chained replay of this trace appends (defer_replay).
  static std::shared_ptr<const CapturedOps> captured_ops(const Trace& t,
                                                         const std::vector<std::shared_ptr<LazyBuffer>>& live) {
    auto c = std::make_shared<CapturedOps>();
    c->ops.resize(t.ops.size());
    for (size_t k = 0; k < t.ops.size(); ++k) {
      c->ops[k].prog = t.ops[k].prog;
      c->ops[k].inputs = t.ops[k].inputs;
      c->ops[k].results.assign(t.ops[k].outs.size(), -1);
    }
    for (size_t r = 0; r < live.size(); ++r) c->ops[live[r]->op].results[live[r]->out] = static_cast<int>(r);
    c->num_results = live.size();
    return c;
  }

  // The fused program's parameter and result types.
  static std::pair<std::vector<std::string>, std::vector<std::string>> signature(
      const Trace& t, const std::vector<std::shared_ptr<LazyBuffer>>& live) {
    // Parameter types come from the first op input that reads each one.
    std::vector<std::string> param_types(t.params.size());
    for (const auto& op : t.ops)
      for (size_t i = 0; i < op.inputs.size(); ++i)
        if (op.inputs[i].param >= 0 && param_types[op.inputs[i].param].empty())
          param_types[op.inputs[i].param] = op.prog->in_sig()[i];
    // Recycled buffers for results are read by no op.
    for (size_t p = 0; p < param_types.size(); ++p)
      if (param_types[p].empty()) param_types[p] = t.params[p]->type().str();
    std::vector<std::string> result_types;
    for (const auto& b : live) result_types.push_back(t.ops[b->op].prog->out_sig()[b->out]);
    return {std::move(param_types), std::move(result_types)};
  }

  static std::string module_text(const Trace& t, const std::vector<std::shared_ptr<LazyBuffer>>& live) {
    std::string s = "module @torch_tpu_fused attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n";
    std::set<int64_t> emitted;
    for (const auto& op : t.ops)
      if (emitted.insert(op.prog->id()).second) s += op.prog->func();
    auto [param_types, result_types] = signature(t, live);
    auto join = [](const std::vector<std::string>& v) {
      std::string r;
      for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + v[i];
      return r;
    };
    auto value = [&](int op, int out) {
      std::string n = "%c" + std::to_string(op);
      return t.ops[op].outs.size() == 1 ? n : n + "#" + std::to_string(out);
    };
    std::vector<std::string> result_values;
    for (const auto& b : live) result_values.push_back(value(b->op, b->out));
    s += "  func.func public @main(";
    for (size_t i = 0; i < t.params.size(); ++i) s += (i ? ", %arg" : "%arg") + std::to_string(i) + ": " + param_types[i];
    s += ") -> (" + join(result_types) + ") {\n";
    for (size_t k = 0; k < t.ops.size(); ++k) {
      const auto& op = t.ops[k];
      std::vector<std::string> operands;
      for (const auto& in : op.inputs)
        operands.push_back(in.param >= 0 ? "%arg" + std::to_string(in.param) : value(in.op, in.out));
      size_t n = op.outs.size();
      s += "    ";
      if (n == 1) s += "%c" + std::to_string(k) + " = ";
      if (n > 1) s += "%c" + std::to_string(k) + ":" + std::to_string(n) + " = ";
      s += "\"func.call\"(" + join(operands) + ") <{callee = @f" + std::to_string(op.prog->id()) + "}> : (" +
           join(op.prog->in_sig()) + ") -> (" + join(op.prog->out_sig()) + ")\n";
    }
    s += "    \"func.return\"(" + join(result_values) + ") : (" + join(result_types) + ") -> ()\n";
    s += "  }\n}\n";
    return s;
  }

  // Remembers outputs of programs that may still be running, for synchronize.
  // Weak: an output nobody holds need not be waited for.
  std::vector<std::weak_ptr<DeviceBuffer>>& in_flight(int device) {
    if (device >= static_cast<int>(in_flight_.size())) in_flight_.resize(device + 1);
    return in_flight_[device];
  }
  // The loop body being recorded on `device`, if any (regions nest: the innermost).
  const Region* recording(int device) const {
    return !regions_.empty() && regions_.back().device == device ? &regions_.back() : nullptr;
  }
  Region pop_region(int device) {
    TORCH_CHECK(recording(device), "torch_tpu: internal error: no loop body is being recorded on tpu:", device);
    Region r = std::move(regions_.back());
    regions_.pop_back();
    pending_.erase(device);
    if (r.saved) pending_[device] = r.saved;
    return r;
  }
  // The region's values never get computed: reading one raises.
  static void forget_region(Region& r) {
    g_stats.pending_ops -= static_cast<int64_t>(r.trace->ops.size());
    for (auto& op : r.trace->ops)
      for (auto& w : op.outs)
        if (auto b = w.lock()) {
          b->trace.reset();
          b->error = "torch_tpu: a value computed inside a loop body was read outside it";
        }
  }

  void track(int device, const std::vector<BufferRef>& outs) {
    auto& v = in_flight(device);
    if (v.size() >= prune_at_) {  // amortised: drop the dropped ones
      v.erase(std::remove_if(v.begin(), v.end(), [](const std::weak_ptr<DeviceBuffer>& w) { return w.expired(); }),
              v.end());
      prune_at_ = std::max<size_t>(1024, 2 * v.size());
    }
    for (const auto& o : outs) v.push_back(o);
  }

  Runtime& inner_;
  int max_ops_ = 2000;
  // Chained replays were one program each already; a training step of them
  // (forward, backward, optimizer) is bounded separately (TPU_REPLAY_CHAIN_MAX_OPS).
  int max_chain_ops_ = 20000;
  int64_t max_link_bytes_ = -1;  // links_too_large; -1: not decided yet (the platform is known at first use)
  size_t prune_at_ = 1024;
  std::vector<std::vector<std::weak_ptr<DeviceBuffer>>> in_flight_;  // by device
  std::unordered_map<int, std::shared_ptr<Trace>> pending_;
  LruCache<ExecutableRef> fused_{256};
  std::unordered_map<std::string, ExecutableRef> flag_programs_;  // first_failed's programs, by device and size
  std::unordered_map<int, BufferRef> passing_flags_;             // its padding, by device
  std::unique_ptr<Capture> capture_;
  std::vector<Region> regions_;  // loop bodies being recorded, innermost last
  struct SequenceHistory {
    int64_t count = 0;
    std::vector<int64_t> ids;  // op program ids of its last compile
  };
  std::unordered_map<size_t, SequenceHistory> sequences_;  // by hash of the op names
  std::unordered_set<size_t> wirings_;  // hashes of trace keys (without donations) compiled whole
  bool split_off_ = false;              // running a split trace's segments
  bool split_enabled_ = true;           // TPU_FUSE_SPLIT=0 turns splitting off
  std::unordered_set<size_t> fused_keys_;                   // hashes of trace keys compiled before
};

ModeRuntime* g_modes = nullptr;

}  // namespace

EagerMode eager_mode() {
  int m = g_mode.load();
  if (m < 0) {
    // Debug wins when both are set: it is asked for to find an error.
    // The reference backend's spellings (TORCH_TPU_...) are read beside ours.
    bool blocking = env_flag("TPU_LAUNCH_BLOCKING") || env_flag("TORCH_TPU_LAUNCH_BLOCKING");
    bool fuse = env_flag("TPU_DEFER_AND_FUSE") || env_flag("TORCH_TPU_DEFER_AND_FUSE");
    int from_env = blocking ? 1 : fuse ? 2 : 0;
    g_mode.compare_exchange_strong(m, from_env);
    m = g_mode.load();
  }
  return static_cast<EagerMode>(m);
}

void set_eager_mode(EagerMode mode) {
  EagerMode old = eager_mode();
  if (old == EagerMode::kFused && mode != EagerMode::kFused && g_modes != nullptr) {
    RuntimeLock lock;
    g_modes->flush_all();
  }
  g_mode.store(static_cast<int>(mode));
}

void mark_step() {
  if (g_modes == nullptr) return;
  RuntimeLock lock;
  g_modes->flush_all();
}

FusionStats fusion_stats() { return g_stats; }

void begin_program_window() {
  RuntimeLock lock;
  g_window.clear();
  g_window_open = true;
  g_stats.window_programs = 0;
}

bool set_split_paused(bool paused) { return g_split_paused.exchange(paused); }

void keep_trace_whole(int device) {
  if (g_modes == nullptr) return;
  RuntimeLock lock;
  g_modes->keep_whole(device);
}

void note_donations(int64_t donated, int64_t copies) {
  g_stats.donated += donated;
  g_stats.donation_copies += copies;
}

bool buffer_ready(const BufferRef& buf) {
  if (!buf) return true;
  if (auto* lazy = dynamic_cast<LazyBuffer*>(buf.get())) {
    if (lazy->trace || !lazy->real) return false;
    return xla_buffer_ready(*lazy->real);
  }
  return xla_buffer_ready(*buf);
}

void invalidate_buffer_for_test(const BufferRef& buf) {
  TORCH_CHECK(buf && g_modes != nullptr, "torch_tpu: no device buffer to invalidate");
  RuntimeLock lock;
  xla_buffer_delete(*g_modes->resolve(buf));
}

void run_checks(int device) {
  if (g_modes != nullptr) g_modes->check_flags(device);
}

void capture_begin(int device, bool keep_text) {
  (void)get();  // the decorator exists once the runtime has started
  RuntimeLock lock;
  g_modes->capture_begin(device, keep_text);
}

CapturedTrace capture_end() {
  RuntimeLock lock;
  return g_modes->capture_end();
}

void capture_abort() {
  if (g_modes == nullptr) return;
  RuntimeLock lock;
  g_modes->capture_abort();
}

bool capture_active() { return g_modes != nullptr && g_modes->capture_active(); }

BufferRef resolve_buffer(const BufferRef& buf) {
  if (!buf || dynamic_cast<LazyBuffer*>(buf.get()) == nullptr) return buf;
  RuntimeLock lock;
  return g_modes->resolve(buf);
}

std::vector<BufferRef> execute_now(const Executable& exe, const std::vector<BufferRef>& args) {
  return g_modes->execute_now(exe, args);
}

std::vector<BufferRef> defer_replay(const std::shared_ptr<const CapturedOps>& ops,
                                    const std::vector<BufferRef>& params, int device) {
  RuntimeLock lock;
  return g_modes->defer_replay(ops, params, device);
}

namespace {
std::atomic<int> g_chain{-1};  // -1: not read from the environment yet
}

bool replay_chaining() {
  int c = g_chain.load(std::memory_order_relaxed);
  if (c < 0) {
    const char* v = std::getenv("TORCH_TPU_REPLAY_CHAIN");
    c = (v == nullptr || *v == '\0' || std::strcmp(v, "0") != 0) ? 1 : 0;
    g_chain.store(c);
  }
  return c == 1;
}

void set_replay_chaining(bool on) { g_chain.store(on ? 1 : 0); }

int64_t set_replay_chain_max_link_bytes(int64_t bytes) {
  RuntimeLock lock;
  return g_modes->set_max_link_bytes(bytes);
}

BufferRef recycled_or_new(const hlo::TensorType& type, int device) {
  RuntimeLock lock;
  return g_modes->recycled_or_new(type, device);
}

ExecutableRef compile_with_aliases(const std::string& text, const Aliases& aliases, int device) {
  RuntimeLock lock;
  return g_modes->compile_with_aliases(text, aliases, device);
}

void region_begin(int device) {
  (void)get();
  RuntimeLock lock;
  g_modes->region_begin(device);
}

BufferRef region_placeholder(const hlo::TensorType& type, int device, int index) {
  auto b = std::make_shared<LazyBuffer>(type, device, nullptr, -1, -1);
  b->region_arg = index;
  return b;
}

RegionTrace region_end(int device, const std::vector<BufferRef>& outputs) {
  RuntimeLock lock;
  return g_modes->region_end(device, outputs);
}

void region_abort(int device) {
  RuntimeLock lock;
  g_modes->region_abort(device);
}

std::unique_ptr<Runtime> make_mode_runtime(Runtime& inner) {
  auto r = std::make_unique<ModeRuntime>(inner);
  g_modes = r.get();
  return r;
}

}  // namespace torch_tpu::runtime
