#include "exec/graph_replay.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "device/generator.h"
#include "device/storage.h"
#include "exec/capture_notes.h"
#include "runtime/modes.h"

namespace torch_tpu::exec {

namespace capture {
std::atomic<bool> g_active{false};
}

namespace {

using runtime::BufferRef;
using runtime::DeviceBuffer;

struct InputInfo {
  at::Tensor tensor;      // undefined: not a tpu tensor
  int rep = -1;           // first input with the same storage
  // Its storage's buffer object when the capture began, and the real buffer
  // behind it. Weak: holding them would keep the graph's trace from
  // donating the buffers it overwrites (donation.h); an expired one was
  // replaced, and no other buffer can take its address while it lives.
  std::weak_ptr<DeviceBuffer> before, real;
  size_t nbytes = 0;
  // Its metadata: a graph that changes it (set_, resize_, t_) is not replayed.
  const c10::StorageImpl* storage = nullptr;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

struct CaptureState {
  int device = 0;
  std::vector<InputInfo> inputs;
  std::unordered_map<const DeviceBuffer*, BufferRef> constants, host;
  std::unordered_map<const DeviceBuffer*, std::pair<BufferRef, at::Generator>> rng;
  std::unordered_map<const DeviceBuffer*, std::pair<BufferRef, runtime::CheckRef>> checks;
};
CaptureState* g_capture = nullptr;  // touched with the GIL held

const c10::StorageImpl* storage_of(const at::Tensor& t) { return t.storage().unsafeGetStorageImpl(); }

}  // namespace

namespace capture {
// Notes hold the buffers, so no address is reused while the capture runs.
void note_constant(const runtime::BufferRef& buf) {
  if (g_capture && buf) g_capture->constants.emplace(buf.get(), buf);
}
void note_host_value(const runtime::BufferRef& buf) {
  if (g_capture && buf) g_capture->host.emplace(buf.get(), buf);
}
void note_rng_key(const runtime::BufferRef& buf, const at::Generator& gen) {
  if (g_capture && buf) g_capture->rng.emplace(buf.get(), std::make_pair(buf, gen));
}
void note_check(const runtime::BufferRef& flag, const runtime::CheckRef& check) {
  if (g_capture && flag) g_capture->checks.emplace(flag.get(), std::make_pair(flag, check));
}
}  // namespace capture

void capture_begin(const std::vector<at::Tensor>& inputs, int device, bool keep_text) {
  runtime::RuntimeLock lock;
  TORCH_CHECK(g_capture == nullptr && !runtime::capture_active(), "torch_tpu: a graph capture is already running");
  runtime::capture_begin(device, keep_text);  // runs pending eager work: every input buffer is real from here on
  auto st = std::make_unique<CaptureState>();
  st->device = device;
  st->inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (!t.defined()) continue;
    auto& in = st->inputs[i];
    in.tensor = t;
    in.rep = static_cast<int>(i);
    for (size_t j = 0; j < i; ++j)
      if (st->inputs[j].tensor.defined() && storage_of(st->inputs[j].tensor) == storage_of(t)) {
        in.rep = st->inputs[j].rep;
        break;
      }
    auto& sb = device::storage_buffer(t.storage());
    in.before = sb.buffer;
    try {
      in.real = runtime::resolve_buffer(sb.buffer);  // raises if its program failed
    } catch (...) {
      runtime::capture_abort();
      throw;
    }
    in.nbytes = t.storage().nbytes();
    in.storage = storage_of(t);
    in.sizes = t.sizes().vec();
    in.strides = t.strides().vec();
    in.offset = t.storage_offset();
  }
  g_capture = st.release();
  capture::g_active = true;
}

void capture_abort() {
  runtime::RuntimeLock lock;
  capture::g_active = false;
  delete g_capture;
  g_capture = nullptr;
  runtime::capture_abort();
}

namespace {

// The capture donated the parameters that were dead when its trace ran. A
// replay may donate only the old buffers of the inputs it overwrites (any
// other input stays readable after the call, e.g. activations kept for a
// second backward); with fewer, it runs a variant compiled without the rest.
void donate_written_inputs(GraphReplay& r, const runtime::CapturedTrace& ct) {
  if (ct.aliases.empty()) return;
  std::vector<bool> written(r.num_inputs, false);
  for (const auto& w : r.writes) written[w.input] = true;
  runtime::Aliases keep;
  for (const auto& [arg, out] : ct.aliases) {
    const auto& p = r.params[r.exe_args[arg]];
    if ((p.kind == GraphReplay::Param::kInput && written[p.input]) || p.kind == GraphReplay::Param::kDonor)
      keep.emplace_back(arg, out);
  }
  if (keep.size() != ct.aliases.size()) r.exe = runtime::compile_with_aliases(ct.text, keep, r.device);
  for (const auto& a : keep) r.donated.push_back(a.first);
}

// Whether `real` (the buffer behind `t`'s storage, held by the caller once)
// is held by that storage alone, so donating it loses nothing.
bool sole_owner(const at::Tensor& t, const BufferRef& real) {
  const BufferRef& held = device::storage_buffer(t.storage()).buffer;
  if (held.get() == real.get()) return real.use_count() == 2;
  return held.use_count() == 1 && real.use_count() == 2;  // held is the lazy buffer wrapping real
}

}  // namespace

std::shared_ptr<GraphReplay> capture_end(const std::vector<at::Tensor>& outputs, std::string* why) {
  runtime::RuntimeLock lock;
  TORCH_CHECK(g_capture != nullptr, "torch_tpu: capture_end without capture_begin");
  std::unique_ptr<CaptureState> st(g_capture);
  runtime::CapturedTrace ct;
  try {
    ct = runtime::capture_end();  // flushes what is still deferred
  } catch (...) {
    capture::g_active = false;
    g_capture = nullptr;
    throw;
  }
  capture::g_active = false;
  g_capture = nullptr;
  auto refuse = [&](std::string msg) -> std::shared_ptr<GraphReplay> {
    *why = std::move(msg);
    return nullptr;
  };
  if (!ct.refused.empty()) return refuse(ct.refused);

  auto r = std::make_shared<GraphReplay>();
  r->device = st->device;
  r->num_inputs = st->inputs.size();
  r->exe = ct.exe;
  if (ct.exe) r->ops = ct.ops;
  r->exe_args = ct.exe_args;
  r->exe_outputs = ct.exe_outputs;
  r->text = ct.text;
  for (const auto& b : ct.results) r->result_types.push_back(b->type());

  // Parameters: whose buffer each one is. Two storages with one buffer
  // would be one parameter that a later call may need to split.
  std::unordered_map<const DeviceBuffer*, int> by_buffer;
  std::unordered_map<const DeviceBuffer*, bool> ambiguous;
  for (const auto& in : st->inputs) {
    BufferRef real = in.tensor.defined() ? in.real.lock() : nullptr;
    if (!real) continue;  // gone before the trace ran: not one of its parameters
    auto [it, added] = by_buffer.emplace(real.get(), in.rep);
    if (!added && it->second != in.rep) ambiguous[real.get()] = true;
  }
  std::vector<bool> donor(ct.params.size(), false);
  for (int d : ct.donors) donor[d] = true;
  for (size_t p = 0; p < ct.params.size(); ++p) {
    const DeviceBuffer* b = ct.params[p].get();
    GraphReplay::Param param{GraphReplay::Param::kInput};
    if (donor[p]) {
      param.kind = GraphReplay::Param::kDonor;
      param.type = ct.params[p]->type();
    } else if (auto it = by_buffer.find(b); it != by_buffer.end()) {
      if (ambiguous.count(b)) return refuse("two input storages share one device buffer");
      param.input = it->second;
    } else if (auto rk = st->rng.find(b); rk != st->rng.end()) {
      param.kind = GraphReplay::Param::kRngKey;
      param.gen = rk->second.second;
    } else if (st->host.count(b)) {
      return refuse("the graph uploads a value from host memory (a CPU tensor argument)");
    } else if (auto c = st->constants.find(b); c != st->constants.end()) {
      param.kind = GraphReplay::Param::kConstant;
      param.constant = c->second;
    } else {
      return refuse("a parameter of the fused program is neither an input, a constant nor a random key "
                    "(a tensor uploaded or held from outside the graph)");
    }
    r->params.push_back(std::move(param));
  }

  std::unordered_map<const DeviceBuffer*, int> result_of;
  for (size_t k = 0; k < ct.results.size(); ++k) result_of.emplace(ct.results[k].get(), static_cast<int>(k));
  std::vector<bool> used(ct.results.size(), false);

  // A replay changes input buffers only, never an input's metadata.
  for (const auto& in : st->inputs) {
    if (!in.tensor.defined()) continue;
    if (storage_of(in.tensor) != in.storage || in.tensor.sizes() != at::IntArrayRef(in.sizes) ||
        in.tensor.strides() != at::IntArrayRef(in.strides) || in.tensor.storage_offset() != in.offset)
      return refuse("the graph changed an input's storage, shape or strides (set_, resize_, an in-place view op)");
  }

  // Input storages the graph wrote: their new buffer must be a result.
  for (size_t i = 0; i < st->inputs.size(); ++i) {
    const auto& in = st->inputs[i];
    if (!in.tensor.defined() || in.rep != static_cast<int>(i)) continue;
    auto& sb = device::storage_buffer(in.tensor.storage());
    if (in.tensor.storage().nbytes() != in.nbytes) return refuse("the graph resized an input's storage");
    if (BufferRef before = in.before.lock(); before && sb.buffer.get() == before.get()) continue;
    auto it = result_of.find(sb.buffer.get());
    if (it == result_of.end()) return refuse("an input's storage was given a buffer the graph did not compute");
    used[it->second] = true;
    r->writes.push_back(GraphReplay::Write{static_cast<int>(i), it->second, sb.dtype});
  }

  // Outputs: views of input storages or of new storages holding results.
  std::unordered_map<const c10::StorageImpl*, int> storage_index;
  for (size_t i = 0; i < st->inputs.size(); ++i) {
    const auto& in = st->inputs[i];
    if (in.tensor.defined() && in.rep == static_cast<int>(i)) {
      storage_index.emplace(storage_of(in.tensor), static_cast<int>(r->storages.size()));
      GraphReplay::Storage s;
      s.input = static_cast<int>(i);
      r->storages.push_back(s);
    }
  }
  for (const auto& o : outputs) {
    TORCH_CHECK(o.defined() && o.is_privateuseone() && o.has_storage(),
                "torch_tpu: internal error: capture_end takes tpu tensors");
    auto [it, added] = storage_index.emplace(storage_of(o), static_cast<int>(r->storages.size()));
    if (added) {
      auto& sb = device::storage_buffer(o.storage());
      GraphReplay::Storage s;
      s.nbytes = o.storage().nbytes();
      s.buffer_dtype = sb.dtype;
      if (sb.buffer) {
        auto k = result_of.find(sb.buffer.get());
        if (k == result_of.end())
          return refuse("an output's storage holds a buffer the graph did not compute (a tensor from outside it?)");
        s.result = k->second;
        used[k->second] = true;
      }
      r->new_bytes += static_cast<int64_t>(s.nbytes);
      r->storages.push_back(s);
    }
    r->outputs.push_back(GraphReplay::Output{it->second, o.scalar_type(), o.sizes().vec(), o.strides().vec(),
                                             o.storage_offset()});
  }
  // Check flags (held by the pending checks): a replay hands its new
  // flags to the checks again.
  for (const auto& [buf, fc] : st->checks) {
    auto k = result_of.find(buf);
    if (k == result_of.end() || used[k->second]) continue;  // read already, or not a result
    used[k->second] = true;
    r->checks.push_back(GraphReplay::Check{k->second, fc.second});
  }
  std::sort(r->checks.begin(), r->checks.end(),
            [](const GraphReplay::Check& a, const GraphReplay::Check& b) { return a.result < b.result; });
  // A result nobody above holds is referenced from somewhere the replay
  // would not update.
  for (size_t k = 0; k < used.size(); ++k)
    if (!used[k]) return refuse("a value the graph computed is held outside its inputs and outputs");
  donate_written_inputs(*r, ct);
  return r;
}

std::vector<at::Tensor> GraphReplay::run(const std::vector<at::Tensor>& inputs) const {
  TORCH_CHECK(inputs.size() == num_inputs, "torch_tpu: replayed graph called with ", inputs.size(),
              " arguments, captured with ", num_inputs);
  runtime::RuntimeLock lock;
  // As for one op: the new storages must fit before anything runs (or a
  // random key is drawn).
  if (new_bytes > 0) device::check_can_allocate(device, new_bytes);
  // Chained: the ops join the pending trace (one program per training step,
  // modes.h); the trace's flush places results and donates dead buffers.
  // Not in Debug Eager (each graph raises at its call) nor while a capture
  // watches the device (its trace must be the captured graph's alone).
  const bool chain = ops && exe && runtime::replay_chaining() &&
                     runtime::eager_mode() != runtime::EagerMode::kDebug && !runtime::capture_active();
  std::vector<BufferRef> pbufs;
  pbufs.reserve(params.size());
  std::vector<bool> exclusive(params.size(), false);
  for (const auto& p : params) {
    switch (p.kind) {
      case Param::kInput: {
        const at::Tensor& t = inputs[p.input];
        TORCH_CHECK(t.defined() && t.is_privateuseone(), "torch_tpu: replayed graph: argument ", p.input,
                    " is not a tpu tensor");
        const BufferRef& held = device::storage_buffer(t.storage()).buffer;
        // Chained, a deferred input stays deferred (it is wired in the trace).
        BufferRef b = chain ? held : runtime::resolve_buffer(held);
        TORCH_CHECK(b, "torch_tpu: replayed graph: argument ", p.input, " has no device buffer");
        if (!chain) exclusive[pbufs.size()] = sole_owner(t, b);
        pbufs.push_back(std::move(b));
        break;
      }
      case Param::kConstant:
        pbufs.push_back(p.constant);
        break;
      case Param::kDonor:
        // Read by no op; a chained trace places its own results.
        exclusive[pbufs.size()] = true;
        pbufs.push_back(chain ? nullptr : runtime::recycled_or_new(p.type, device));
        break;
      case Param::kRngKey: {
        // A fresh key per call, drawn in the order the ops drew theirs, so a
        // replay draws the numbers the eager run would.
        auto* impl = at::check_generator<device::TpuGeneratorImpl>(p.gen);
        std::pair<uint64_t, uint64_t> key;
        {
          std::lock_guard<std::mutex> g(p.gen.mutex());
          key = impl->next_key();
        }
        uint64_t words[2] = {key.first, key.second};
        pbufs.push_back(runtime::get().to_device(words, hlo::TensorType{hlo::ElementType::kU64, {2}}, device));
        break;
      }
    }
  }
  std::vector<BufferRef> results;
  if (chain) {
    results = runtime::defer_replay(ops, pbufs, device);
  } else if (exe) {
    std::vector<BufferRef> args;
    args.reserve(exe_args.size());
    for (int a : exe_args) args.push_back(pbufs[a]);
    // A donated buffer something else still holds (another pending trace,
    // a second storage) is copied: the executable consumes what it is given.
    int64_t copies = 0;
    for (int a : donated)
      if (!exclusive[exe_args[a]]) {
        args[a] = runtime::copy_buffer(args[a]);
        ++copies;
      }
    runtime::note_donations(static_cast<int64_t>(donated.size()), copies);
    auto outs = runtime::execute_now(*exe, args);
    results.reserve(exe_outputs.size());
    for (int o : exe_outputs) results.push_back(outs[o]);
  }
  for (const auto& c : checks) runtime::defer_check(device, results[c.result], c.check);
  for (const auto& w : writes) {
    auto& sb = device::storage_buffer(inputs[w.input].storage());
    sb.buffer = results[w.result];
    sb.dtype = w.buffer_dtype;
  }
  std::vector<c10::Storage> made;
  made.reserve(storages.size());
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
    for (const auto& s : storages) {
      if (s.input >= 0) {
        made.push_back(inputs[s.input].storage());
        continue;
      }
      c10::Storage st(c10::Storage::use_byte_size_t(), s.nbytes, device::allocator(), /*resizable=*/true);
      auto& sb = device::storage_buffer(st);
      if (s.result >= 0) sb.buffer = results[s.result];
      sb.dtype = s.buffer_dtype;
      made.push_back(std::move(st));
    }
  }
  std::vector<at::Tensor> outs;
  outs.reserve(outputs.size());
  for (const auto& o : outputs) {
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(made[o.storage]),
                                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                     caffe2::TypeMeta::fromScalarType(o.dtype));
    impl->set_sizes_and_strides(o.sizes, o.strides, o.offset);
    outs.emplace_back(std::move(impl));
  }
  return outs;
}

}  // namespace torch_tpu::exec
