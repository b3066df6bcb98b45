#include "exec/op_runner.h"

#include <algorithm>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "device/generator.h"
#include "exec/arg_checks.h"
#include "exec/capture_notes.h"
#include "exec/cpu_fallback.h"
#include "exec/device_checks.h"
#include "exec/direct_composites.h"
#include "exec/fill.h"
#include "exec/meta_fixups.h"
#include "exec/tensor_key.h"
#include "exec/recompile_reason.h"
#include "device/guard.h"
#include "device/storage.h"
#include "lowering/precision.h"
#include "lowering/registry.h"
#include "lowering/view.h"
#include "runtime/runtime.h"
#include "runtime/compiler_options.h"
#include "runtime/lru_cache.h"
#include "runtime/modes.h"
#include "runtime/recompile_log.h"

namespace torch_tpu::exec {

using lowering::ElementType;
using lowering::LowerCtx;
using lowering::OutputMeta;
using lowering::ParamSource;
using lowering::Value;

namespace {

// ---- argument walking -------------------------------------------------------

template <typename F>
void for_each_tensor(const std::vector<c10::IValue>& args, F&& f) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& v = args[i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) f(v.toTensor(), static_cast<int>(i), -1);
    } else if (v.isList()) {
      auto list = v.toListRef();
      for (size_t k = 0; k < list.size(); ++k)
        if (list[k].isTensor() && list[k].toTensor().defined())
          f(list[k].toTensor(), static_cast<int>(i), static_cast<int>(k));
    }
  }
}

bool is_write(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

std::string full_name(const c10::FunctionSchema& s) {
  return s.overload_name().empty() ? s.name() : s.name() + "." + s.overload_name();
}

// ---- program cache key --------------------------------------------------------

bool scalars_shape_output(const c10::FunctionSchema& s);
bool floats_are_operands(const c10::FunctionSchema& s);
bool is_runtime_operand(const c10::Argument& a, bool runtime_floats);

// What the per-call path needs to know about an op, worked out on its first
// call instead of on every call (the schema's name, which arguments are
// runtime operands, which argument checks apply). By schema address, which
// is stable while the op is registered; the name and argument list are
// compared on each lookup, so an op registered again (torch.library in a
// test) at the same address is not taken for the old one.
struct OpInfo {
  const c10::FunctionSchema* schema = nullptr;
  const c10::Argument* arguments = nullptr;
  size_t num_arguments = 0;
  std::string name;        // "aten::add.Tensor"
  std::string key_prefix;  // name and '#'
  bool static_scalars = false, runtime_floats = false;
  std::vector<uint8_t> operand;  // per argument: a Scalar value is a runtime operand
  ArgCheckPlan checks;
  FillKind fill = FillKind::kNone;  // a constant fill: the host path may take it (fill.h)
};

// Touched with the runtime lock held.
const OpInfo& op_info(const c10::FunctionSchema& schema) {
  static auto* infos = new std::unordered_map<const c10::FunctionSchema*, OpInfo>();
  auto it = infos->find(&schema);
  const auto& sargs = schema.arguments();
  if (it != infos->end() && it->second.arguments == sargs.data() && it->second.num_arguments == sargs.size() &&
      it->second.name.size() >= schema.name().size() &&
      it->second.name.compare(0, schema.name().size(), schema.name()) == 0)
    return it->second;
  OpInfo info;
  info.schema = &schema;
  info.arguments = sargs.data();
  info.num_arguments = sargs.size();
  info.name = full_name(schema);
  info.key_prefix = info.name + '#';
  info.static_scalars = scalars_shape_output(schema);
  info.runtime_floats = floats_are_operands(schema);
  for (const auto& a : sargs) info.operand.push_back(!info.static_scalars && is_runtime_operand(a, info.runtime_floats));
  info.checks = plan_arg_checks(schema);
  info.fill = fill_kind(schema);
  return (*infos)[&schema] = std::move(info);
}

// `written`: the op's written storages, or null where `t` is itself written
// (lowering::offset_is_operand).
void append_tensor(std::string& k, const at::Tensor& t, const lowering::WrittenStorages* written,
                   SeenStorages& storages) {
  if (t.device().is_cpu()) {
    // A wrapped Python number lowers unlike a 0-dim CPU tensor (ew::in).
    k += t.unsafeGetTensorImpl()->is_wrapped_number() ? 'w' : 'c';
    append_int(k, static_cast<int>(t.scalar_type()));
    for (auto s : t.sizes()) append_int(k, s);
    return;
  }
  k += 'T';
  append_tensor_layout(k, t, storages, written && lowering::offset_is_operand(t, false, *written));
}

// Ops whose output shape follows from Scalar arguments: their Scalars are
// part of the key (elsewhere a Scalar is a runtime operand).
bool scalars_shape_output(const c10::FunctionSchema& s) {
  return s.name() == "aten::arange" || s.name() == "aten::range";
}

// `Scalar` / `Scalar?` arguments (int, float and int[] arguments are not).
bool is_scalar_type(const c10::Argument& a) {
  auto kind = a.type()->kind();
  if (kind == c10::TypeKind::OptionalType) kind = a.type()->containedType(0)->kind();
  return kind == c10::TypeKind::NumberType;
}

// Fused optimizer steps (`_fused_adam_`, ...) take lr, betas and friends as
// `float`; their rules read them as runtime operands, so a learning-rate
// schedule does not recompile.
bool floats_are_operands(const c10::FunctionSchema& s) { return s.name().rfind("aten::_fused_", 0) == 0; }

bool is_runtime_operand(const c10::Argument& a, bool runtime_floats) {
  return is_scalar_type(a) || (runtime_floats && a.type()->kind() == c10::TypeKind::FloatType);
}

// `operand`: a Scalar value of this argument is a runtime operand
// (OpInfo::operand); `written` as for append_tensor.
void append_value(std::string& k, const c10::IValue& v, const c10::Argument& a, bool operand,
                  const lowering::WrittenStorages* written, SeenStorages& storages) {
  if (v.isTensor()) {
    if (v.toTensor().defined())
      append_tensor(k, v.toTensor(), written, storages);
    else
      k += 'N';
  } else if (v.isNone()) {
    k += 'N';
  } else if (v.isList()) {
    auto list = v.toListRef();
    k += 'L';
    append_int(k, static_cast<int64_t>(list.size()));
    for (const auto& e : list) append_value(k, e, a, operand, written, storages);
  } else if (v.isScalar() && operand) {
    // A Scalar (or Scalar?) argument is a runtime operand: only its kind
    // shapes the program, and whether it is the schema's default (then a
    // constant: lowering::is_default_scalar).
    if (lowering::is_default_scalar(a, v)) k += 'D';
    k += v.isDouble() ? 'd' : v.isInt() ? 'i' : v.isBool() ? 'b' : 'z';
  } else if (v.isDouble()) {
    double d = v.toDouble();
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    k += 'f';
    append_int(k, static_cast<int64_t>(bits));
  } else if (v.isInt()) {
    k += 'i';
    append_int(k, v.toInt());
  } else if (v.isBool()) {
    k += v.toBool() ? "t," : "F,";
  } else if (v.isString()) {
    k += 's';
    k += v.toStringRef();
    k += ',';
  } else if (v.isGenerator()) {
    k += 'g';
  } else if (v.isDevice()) {
    k += 'D';
    k += static_cast<char>(v.toDevice().type());
    k += static_cast<char>(v.toDevice().index());
  } else {
    // dtype, layout, memory_format and friends are ints inside IValue.
    k += 'o';
    k += v.tagKind();
    k += ':';
    std::ostringstream os;
    os << v;
    k += os.str();
    k += ',';
  }
  k += '|';
}

// ---- compiled programs ----------------------------------------------------------

struct Write {
  int arg, item;
  int result;
  at::ScalarType dtype;
};
struct NewOut {
  int result;  // -1: an undefined tensor
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // empty: contiguous
};
// One schema return: an argument (in-place / out=), or new outputs.
struct ReturnPlan {
  int alias_arg = -1;
  int first_new = 0;
  int num_new = 0;
  bool is_list = false;
};

// A device-side check of the op (lowering/index_check.h): the program's
// result `result` is its flag.
struct CheckOut {
  int result;
  runtime::CheckRef check;
};

// An out= argument resized to the op's result shape (and strides: empty
// for contiguous).
struct Resize {
  int arg;
  std::vector<int64_t> sizes, strides;
};

void apply_resize(const at::Tensor& t, const Resize& r) {
  t.resize_(r.sizes);
  if (!r.strides.empty()) t.as_strided_(r.sizes, r.strides);
}

struct Program {
  runtime::ExecutableRef exe;
  int device = 0;
  std::vector<ParamSource> params;
  std::vector<Resize> resizes;  // out= tensors of the wrong size, on every call
  std::vector<Write> writes;
  std::vector<NewOut> news;
  std::vector<ReturnPlan> returns;
  std::vector<CheckOut> checks;  // usually none
  int donated = 0;               // storage buffers the program updates in place (compile_op)
};

// Programs by key, the TORCH_TPU_PROGRAM_CACHE_SIZE (default 4096) most
// recently used: each holds XLA code mappings (lru_cache.h), and an evicted
// program that comes back is a disk-cache load, not a compile.
runtime::LruCache<std::shared_ptr<Program>>& cache() {
  static auto* c = [] {
    size_t cap = 4096;
    if (const char* n = std::getenv("TORCH_TPU_PROGRAM_CACHE_SIZE")) cap = std::max(1, std::atoi(n));
    return new runtime::LruCache<std::shared_ptr<Program>>(cap);
  }();
  return *c;
}
ProgramCacheStats g_stats;

const at::Tensor& tensor_at(const std::vector<c10::IValue>& args, int arg, int item) {
  if (item < 0) return args[arg].toTensor();
  return args[arg].toListRef()[item].toTensor();
}

// ---- meta: PyTorch's own shape, dtype and error checking ----------------------

struct MetaResult {
  bool known = false;
  std::vector<std::optional<OutputMeta>> returns;  // flattened schema returns
  std::vector<c10::IValue> args;                    // meta arguments after the call
};

at::Tensor to_meta(const at::Tensor& t, std::unordered_map<const void*, at::Tensor>& bases, bool read_only = true) {
  if (read_only && t.defined() && t.is_cpu() && t.dim() == 0 && !t.unsafeGetTensorImpl()->is_wrapped_number()) {
    // A 0-dim CPU tensor read by the op is a scalar operand in any position
    // (as on CUDA), but a meta kernel meeting one before the first device
    // tensor (`c * x`) makes it the common device and fails copying meta to
    // cpu. A 0-dim meta tensor promotes types the same way. (Wrapped Python
    // numbers stay: they never come first, and Python meta kernels turn them
    // back into numbers, which PyTorch allows for CPU ones only. A CPU out=
    // or self of an in-place op stays too, so the meta kernel refuses it.)
    return at::empty({}, t.options().device(at::kMeta));
  }
  if (!t.defined() || !t.is_privateuseone()) return t;
  int64_t numel = device::storage_numel(t);
  auto opts = t.options().device(at::kMeta);
  if (t.storage_offset() == 0 && t.numel() == numel && t.is_contiguous())
    return at::empty_strided(t.sizes(), t.strides(), opts);
  const void* key = t.storage().unsafeGetStorageImpl();
  auto it = bases.find(key);
  if (it == bases.end() || it->second.scalar_type() != t.scalar_type())
    it = bases.insert_or_assign(key, at::empty({numel}, opts)).first;
  return it->second.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

// A result's strides for OutputMeta / Resize: the meta tensor's when they
// are a dense layout other than contiguous, else none (contiguous).
std::vector<int64_t> dense_strides(const at::Tensor& m) {
  if (m.is_contiguous() || !m.is_non_overlapping_and_dense()) return {};
  return m.strides().vec();
}

MetaResult run_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  MetaResult r;
  std::unordered_map<const void*, at::Tensor> bases;
  torch::jit::Stack stack;
  const auto& sargs = op.schema().arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& v = args[i];
    if (v.isTensor()) {
      stack.emplace_back(to_meta(v.toTensor(), bases, i >= sargs.size() || !is_write(sargs[i])));
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> ts;
      for (const auto& t : v.toTensorVector()) ts.push_back(to_meta(t, bases));
      stack.emplace_back(ts);
    } else if (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::OptionalType &&
               v.toList().elementType()->containedType(0)->kind() == c10::TypeKind::TensorType) {
      c10::List<std::optional<at::Tensor>> ts;
      for (const auto& e : v.toListRef())
        ts.push_back(e.isTensor() ? std::optional<at::Tensor>(to_meta(e.toTensor(), bases)) : std::nullopt);
      stack.emplace_back(ts);
    } else if (v.isGenerator()) {
      stack.emplace_back();  // meta kernels draw no numbers
    } else if (v.isDevice()) {
      // Factories: without this the meta call would dispatch back to tpu.
      stack.emplace_back(c10::Device(c10::kMeta));
    } else {
      stack.push_back(v);
    }
  }
  r.args = stack;  // handles: resizes made by the meta kernel show through
  DirectKind direct = direct_kind(op);
  bool composite = direct == DirectKind::kComposite;
  try {
    if (direct != DirectKind::kNone) {
      // A structured op's functional overload, which the engine takes
      // itself (aten/structured_direct.cpp): its meta is PyTorch's wrapper
      // for backends without a kernel, run on the meta tensors through a
      // backend key that has no kernels of its own. So CPU's C++ meta
      // function checks the call, words its errors and lays the result out
      // (the overload's Meta kernel may be a Python one that checks less:
      // argmax of bool), as when the wrapper stood in front of the engine.
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse3), &stack);
    } else {
      op.callBoxed(stack);
    }
  } catch (const c10::NotImplementedError&) {
    return r;  // no meta kernel: the rule's own types decide
  }
  r.known = true;
  if (composite) {
    // The composite gave CPU's checks, types and shapes, laid out
    // contiguously (its out= meta kernel); the layout is the functional
    // overload's own meta kernel's, where it has one that agrees.
    torch::jit::Stack layout(r.args.begin(), r.args.end());
    try {
      op.callBoxed(layout);
    } catch (const std::exception&) {
      layout.clear();
    }
    if (layout.size() == stack.size())
      for (size_t i = 0; i < stack.size(); ++i)
        if (stack[i].isTensor() && layout[i].isTensor() && stack[i].toTensor().sizes() == layout[i].toTensor().sizes() &&
            stack[i].toTensor().scalar_type() == layout[i].toTensor().scalar_type())
          stack[i] = layout[i];
  }
  for (const auto& v : stack) {
    if (v.isNone() || (v.isTensor() && !v.toTensor().defined())) {
      r.returns.push_back(OutputMeta{at::ScalarType::Undefined, {}, false});
    } else if (v.isTensor()) {
      const auto& t = v.toTensor();
      r.returns.push_back(OutputMeta{t.scalar_type(), t.sizes().vec()});
      r.returns.back()->strides = dense_strides(t);
    } else if (v.isTensorList()) {
      for (const auto& t : v.toTensorVector()) r.returns.push_back(OutputMeta{t.scalar_type(), t.sizes().vec()});
    }
  }
  fix_meta_returns(op.schema(), args, r.returns);  // CPU's shapes where meta differs
  return r;
}

// ---- lowering one op to a program ---------------------------------------------------

Value fit(Value v, at::ScalarType dtype, const std::vector<int64_t>& sizes) {
  v = hlo::convert(v, lowering::element_type(dtype));
  if (v.dims() == sizes) return v;
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  if (v.type().numel() == n && v.rank() != static_cast<int64_t>(sizes.size())) return hlo::reshape(v, sizes);
  return hlo::broadcast_to(v, sizes);
}

// The order of dims, outermost first, in which `strides` lay a tensor of
// `sizes` out densely, when that is not the contiguous order; nullopt for
// contiguous or for strides that are not such a layout (the output is then
// contiguous). Size-1 dims have any stride and keep their place.
std::optional<hlo::Dims> dense_order(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (strides.empty() || strides.size() != sizes.size()) return std::nullopt;
  hlo::Dims moving;  // dims of size > 1, largest stride first
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) moving.push_back(static_cast<int64_t>(d));
  std::stable_sort(moving.begin(), moving.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  hlo::Dims order(sizes.size());
  for (size_t d = 0, m = 0; d < sizes.size(); ++d) order[d] = sizes[d] == 1 ? static_cast<int64_t>(d) : moving[m++];
  int64_t expect = 1;
  bool identity = true;
  for (size_t i = order.size(); i-- > 0;) {
    int64_t d = order[i];
    identity &= d == static_cast<int64_t>(i);
    if (sizes[d] == 1) continue;
    if (strides[d] != expect) return std::nullopt;
    expect *= sizes[d];
  }
  if (identity) return std::nullopt;
  return order;
}

std::string describe_tensors(const std::vector<c10::IValue>& args) {
  std::string s;
  for_each_tensor(args, [&](const at::Tensor& t, int, int) {
    std::ostringstream os;
    os << (s.empty() ? "" : ", ") << t.scalar_type() << t.sizes() << " on " << t.device();
    s += os.str();
  });
  return s.empty() ? "no tensors" : s;
}

std::shared_ptr<Program> compile_op(const c10::OperatorHandle& op, std::vector<c10::IValue>& args, int device,
                                    const std::vector<bool>& donate) {
  const auto& schema = op.schema();
  const auto& sargs = schema.arguments();
  std::string name = schema.name().substr(schema.name().find("::") + 2);
  lowering::Rule rule = lowering::find_rule(name);
  TORCH_CHECK_NOT_IMPLEMENTED(rule != nullptr, "torch_tpu: ", full_name(schema),
                              " has no tpu lowering yet (called with ", describe_tensors(args),
                              "); no CPU fallback is taken. torch_tpu.cpu_fallback(True) or "
                              "TORCH_TPU_CPU_FALLBACK=1 runs such ops on the CPU (copying their tensors).");

  auto prog = std::make_shared<Program>();
  prog->device = device;
  MetaResult meta = run_meta(op, args);

  // Which argument each aliasing return writes to.
  const auto& srets = schema.returns();
  auto aliased_arg = [&](const c10::Argument& ret) -> int {
    if (!ret.alias_info() || !ret.alias_info()->isWrite()) return -1;
    for (size_t a = 0; a < sargs.size(); ++a)
      if (sargs[a].alias_info() && sargs[a].alias_info()->beforeSets() == ret.alias_info()->beforeSets())
        return static_cast<int>(a);
    return -1;
  };
  std::vector<bool> returned(sargs.size(), false);
  std::vector<int> return_of(sargs.size(), -1);
  for (size_t j = 0; j < srets.size(); ++j) {
    int a = aliased_arg(srets[j]);
    if (a >= 0) {
      returned[a] = true;
      return_of[a] = static_cast<int>(j);
    }
  }

  // out= tensors take the shape the meta kernel gave them, or the shape
  // fix_meta_returns gave the return that aliases them (eval-mode batch
  // norm's save_mean into out=: [0], as on CPU, where the meta kernel says [C]).
  if (meta.known) {
    for (size_t a = 0; a < sargs.size(); ++a) {
      if (!is_write(sargs[a]) || !args[a].isTensor() || !meta.args[a].isTensor()) continue;
      auto& real = args[a].toTensor();
      const auto& m = meta.args[a].toTensor();
      std::vector<int64_t> new_sizes = m.sizes().vec();
      std::vector<int64_t> strides = dense_strides(m);
      int j = return_of[a];
      if (j >= 0 && static_cast<size_t>(j) < meta.returns.size() && meta.returns[j] && meta.returns[j]->defined &&
          meta.returns[j]->sizes != new_sizes) {
        new_sizes = meta.returns[j]->sizes;
        strides.clear();  // contiguous
      }
      if (real.sizes() != c10::IntArrayRef(new_sizes)) {
        // Resized as the meta kernel resized it: TensorIterator restrides a
        // resized out= to its inputs' layout (abs of a channels-last tensor).
        prog->resizes.push_back(Resize{static_cast<int>(a), new_sizes, strides});
        apply_resize(real, prog->resizes.back());
      }
    }
  }

  // Output metadata for the rule: one slot per value it returns.
  std::vector<std::optional<OutputMeta>> slots;
  if (meta.known) {
    slots = meta.returns;
    for (size_t a = 0; a < sargs.size(); ++a) {
      if (!is_write(sargs[a]) || returned[a]) continue;
      for_each_tensor({meta.args[a]}, [&](const at::Tensor& t, int, int) {
        slots.push_back(OutputMeta{t.scalar_type(), t.sizes().vec()});
      });
    }
  }

  LowerCtx ctx(schema, args, slots);
  std::vector<Value> results;
  try {
    results = rule(ctx);
  } catch (const hlo::UnsupportedElementType& e) {
    // A dtype the op has no kernel for, as PyTorch's dispatch reports it.
    // Named as CPU names it: the first tensor argument's dtype (a uint8
    // input the rule widened is still 'Byte'), or the complex dtype when
    // StableHLO refused a complex operand (remainder of float and complex:
    // 'ComplexFloat').
    std::string dtype = "?";
    for_each_tensor(args, [&](const at::Tensor& t, int, int) {
      if (dtype == "?") dtype = c10::toString(t.scalar_type());
    });
    if (hlo::is_complex(e.element)) dtype = c10::toString(lowering::scalar_type(e.element));
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", full_name(schema), "\" not implemented for '", dtype, "' (on tpu: ",
                                e.what(), ")");
  }
  auto& b = ctx.b();

  // Results land either in new tensors or in argument storages.
  std::vector<Value> outputs;
  std::vector<std::pair<const void*, Value>> storages;  // updated storage values
  std::vector<Write> writes;
  size_t r = 0;
  auto take = [&]() -> Value {
    TORCH_CHECK(r < results.size(), "torch_tpu: lowering of ", full_name(schema), " returned ", results.size(),
                " values, fewer than the op's outputs");
    return results[r++];
  };
  auto write_to = [&](int arg, int item) {
    const at::Tensor& t = tensor_at(args, arg, item);
    Value raw = take();
    // No meta kernel: an out= tensor takes the rule's result shape, as
    // CPU's kernels resize theirs.
    if (!meta.known && item < 0 && sargs[arg].is_out() && t.sizes() != at::IntArrayRef(raw.dims())) {
      prog->resizes.push_back(Resize{arg, raw.dims(), {}});
      apply_resize(args[arg].toTensor(), prog->resizes.back());
    }
    Value v = fit(raw, t.scalar_type(), t.sizes().vec());
    const void* key = t.storage().unsafeGetStorageImpl();
    int64_t numel = device::storage_numel(t);
    lowering::ViewLayout layout{t.sizes(), t.strides(), t.storage_offset()};
    for (size_t i = 0; i < storages.size(); ++i) {
      if (storages[i].first == key) {  // a second write into the same storage builds on the first
        Value& cur = storages[i].second;
        cur = lowering::write_view(lowering::reinterpret_storage(cur, v.element()), layout, v);
        writes[i].dtype = t.scalar_type();
        return;
      }
    }
    Value updated = lowering::covers_storage(layout, numel) ? hlo::reshape(v, {numel})
                                                            : lowering::write_view(ctx.storage_param(arg, item), layout, v);
    storages.emplace_back(key, updated);
    writes.push_back(Write{arg, item, -1, t.scalar_type()});
  };
  auto new_output = [&](size_t slot) {
    Value v = take();
    if (slot < slots.size() && slots[slot] && !slots[slot]->defined) {
      prog->news.push_back(NewOut{-1, at::ScalarType::Undefined, {}});
      return;
    }
    at::ScalarType dtype = slot < slots.size() && slots[slot] ? slots[slot]->dtype : lowering::scalar_type(v.element());
    std::vector<int64_t> sizes = slot < slots.size() && slots[slot] ? slots[slot]->sizes : v.dims();
    v = fit(v, dtype, sizes);
    int64_t n = v.type().numel();
    std::vector<int64_t> strides = slot < slots.size() && slots[slot] ? slots[slot]->strides
                                                                      : cpu_result_strides(schema, args, slot, sizes);
    if (auto order = dense_order(sizes, strides))
      v = hlo::transpose(v, *order);  // laid out as the strides say before flattening
    else
      strides.clear();
    prog->news.push_back(NewOut{static_cast<int>(outputs.size()), dtype, sizes, std::move(strides)});
    outputs.push_back(hlo::reshape(v, {n}));
  };

  size_t extras = 0;
  for (size_t a = 0; a < sargs.size(); ++a)
    if (is_write(sargs[a]) && !returned[a]) for_each_tensor({args[a]}, [&](const at::Tensor&, int, int) { ++extras; });

  for (const auto& ret : srets) {
    ReturnPlan plan;
    int a = aliased_arg(ret);
    bool is_list = ret.type()->kind() == c10::TypeKind::ListType;
    if (a >= 0) {
      plan.alias_arg = a;
      if (args[a].isTensor()) {
        write_to(a, -1);
      } else {
        for_each_tensor({args[a]}, [&](const at::Tensor&, int, int item) { write_to(a, item); });
      }
    } else if (is_list) {
      plan.is_list = true;
      plan.first_new = static_cast<int>(prog->news.size());
      size_t count = results.size() - r - extras;
      for (size_t i = 0; i < count; ++i) new_output(r);
      plan.num_new = static_cast<int>(count);
    } else {
      TORCH_CHECK_NOT_IMPLEMENTED(ret.type()->kind() == c10::TypeKind::TensorType, "torch_tpu: ", full_name(schema),
                                  " returns a ", ret.type()->str(), "; only tensor results are lowered");
      plan.first_new = static_cast<int>(prog->news.size());
      plan.num_new = 1;
      new_output(r);
    }
    prog->returns.push_back(plan);
  }
  for (size_t a = 0; a < sargs.size(); ++a) {
    if (!is_write(sargs[a]) || returned[a]) continue;
    if (args[a].isTensor()) {
      if (args[a].toTensor().defined()) write_to(static_cast<int>(a), -1);
    } else {
      for_each_tensor({args[a]}, [&](const at::Tensor&, int, int item) { write_to(static_cast<int>(a), item); });
    }
  }
  for (size_t i = 0; i < writes.size(); ++i) {
    writes[i].result = static_cast<int>(outputs.size());
    outputs.push_back(storages[i].second);
  }
  prog->writes = std::move(writes);
  // Check flags are the last results (one tiny tensor each).
  for (const auto& c : ctx.checks()) {
    prog->checks.push_back(CheckOut{static_cast<int>(outputs.size()), make_check(c)});
    outputs.push_back(c.flag);
  }
  prog->params = ctx.params();
  std::string text = b.module_text(outputs);
  // A partial write into a storage whose buffer nothing else holds
  // (`donate`, decided per call in run_lowered_op and part of the key):
  // the storage's parameter is aliased to its updated value, so XLA
  // updates the slice in place instead of copying the whole storage.
  runtime::Aliases aliases;
  for (const auto& w : prog->writes) {
    if (w.item >= 0 || w.arg >= static_cast<int>(donate.size()) || !donate[w.arg]) continue;
    const at::Tensor& t = tensor_at(args, w.arg, w.item);
    const auto& sb = device::storage_buffer(t.storage());
    for (size_t p = 0; p < prog->params.size(); ++p) {
      const auto& ps = prog->params[p];
      if (ps.kind != ParamSource::kStorage) continue;
      const at::Tensor& pt = tensor_at(args, ps.arg, ps.item);
      if (pt.storage().unsafeGetStorageImpl() != t.storage().unsafeGetStorageImpl()) continue;
      if (sb.buffer && outputs[w.result].type() == sb.buffer->type())
        aliases.emplace_back(static_cast<int>(p), w.result);
      break;
    }
  }
  if (!aliases.empty()) text = runtime::with_aliases(text, aliases);
  prog->donated = static_cast<int>(aliases.size());
  prog->exe = runtime::get().compile(text, device, full_name(schema));
  return prog;
}

// ---- running a program ------------------------------------------------------------

// Uploaded scalars, by (dtype, bits, device): constants such as alpha=1 or a
// fixed learning rate are sent once.
struct ScalarKey {
  uint64_t bits[2];
  int dtype, device;
  bool operator==(const ScalarKey& o) const {
    return bits[0] == o.bits[0] && bits[1] == o.bits[1] && dtype == o.dtype && device == o.device;
  }
};
struct ScalarKeyHash {
  size_t operator()(const ScalarKey& k) const {
    uint64_t h = k.bits[0] * 0x9E3779B97F4A7C15ull ^ (k.bits[1] + 0x632BE59BD9B4E019ull + (h_mix(k.dtype, k.device)));
    return static_cast<size_t>(h ^ (h >> 29));
  }
  static uint64_t h_mix(int dtype, int device) { return (static_cast<uint64_t>(dtype) << 32) ^ static_cast<uint64_t>(device); }
};

runtime::BufferRef upload_scalar(const c10::Scalar& s, at::ScalarType dtype, int device) {
  static auto* cache = new std::unordered_map<ScalarKey, runtime::BufferRef, ScalarKeyHash>();
  uint8_t bytes[16] = {0};
  scalar_bytes(s, dtype, bytes);
  ScalarKey key{{0, 0}, static_cast<int>(dtype), device};
  std::memcpy(key.bits, bytes, 16);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  if (cache->size() > 4096) cache->clear();
  auto buf = runtime::get().to_device(bytes, hlo::TensorType{lowering::element_type(dtype), {}}, device);
  cache->emplace(key, buf);
  return buf;
}

// The value of a 0-dim CPU tensor (a wrapped Python number in `x * 2.0`),
// read directly for the common dtypes: Tensor::item() is a dispatcher call.
c10::Scalar cpu_scalar(const at::Tensor& t) {
  if (!t.is_conj() && !t.is_neg()) {
    switch (t.scalar_type()) {
      case at::kDouble: return *t.const_data_ptr<double>();
      case at::kFloat: return *t.const_data_ptr<float>();
      case at::kLong: return *t.const_data_ptr<int64_t>();
      case at::kInt: return *t.const_data_ptr<int32_t>();
      case at::kBool: return *t.const_data_ptr<bool>();
      default: break;
    }
  }
  return t.item();
}

runtime::BufferRef rng_key_buffer(const std::vector<c10::IValue>& args, int gen_arg, int device) {
  at::Generator gen;
  if (gen_arg >= 0 && args[gen_arg].isGenerator()) gen = args[gen_arg].toGenerator();
  if (!gen.defined()) gen = device::default_generator(static_cast<c10::DeviceIndex>(device));
  auto* impl = at::check_generator<device::TpuGeneratorImpl>(gen);
  std::pair<uint64_t, uint64_t> key;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    key = impl->next_key();
  }
  uint64_t words[2] = {key.first, key.second};
  auto buf = runtime::get().to_device(words, hlo::TensorType{ElementType::kU64, {2}}, device);
  if (capture::active()) capture::note_rng_key(buf, gen);  // a replay draws its own
  return buf;
}

void run_program(const Program& prog, std::vector<c10::IValue>& args, torch::jit::Stack* stack) {
  std::vector<runtime::BufferRef> inputs;
  inputs.reserve(prog.params.size());
  for (const auto& p : prog.params) {
    switch (p.kind) {
      case ParamSource::kStorage:
        inputs.push_back(device::storage_buffer(tensor_at(args, p.arg, p.item).storage()).buffer);
        break;
      case ParamSource::kScalar:
        inputs.push_back(upload_scalar(args[p.arg].toScalar(), p.dtype, prog.device));
        if (capture::active()) capture::note_constant(inputs.back());  // a graph's Scalars are its constants
        break;
      case ParamSource::kCpuTensor: {
        const at::Tensor& t = tensor_at(args, p.arg, p.item);
        if (t.dim() == 0) {
          inputs.push_back(upload_scalar(cpu_scalar(t), p.dtype, prog.device));
        } else {
          at::Tensor host = t.contiguous();
          inputs.push_back(runtime::get().to_device(
              host.const_data_ptr(), hlo::TensorType{lowering::element_type(host.scalar_type()), host.sizes().vec()},
              prog.device));
        }
        // A wrapped number is a Python scalar of the graph (`x + 1` as
        // add.Tensor): a constant. Any other CPU tensor may differ next call.
        if (capture::active()) {
          if (t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number())
            capture::note_constant(inputs.back());
          else
            capture::note_host_value(inputs.back());
        }
        break;
      }
      case ParamSource::kRngKey:
        inputs.push_back(rng_key_buffer(args, p.arg, prog.device));
        break;
      case ParamSource::kOffset:
        inputs.push_back(upload_scalar(c10::Scalar(tensor_at(args, p.arg, p.item).storage_offset()), at::kLong,
                                       prog.device));
        // A replay's signature holds its inputs' offsets, and views made
        // inside the graph get theirs from its constants: fixed per replay.
        if (capture::active()) capture::note_constant(inputs.back());
        break;
    }
  }
  // The new outputs must fit in device memory before anything runs: an op
  // that does not fit raises OutOfMemoryError and changes nothing.
  int64_t new_bytes = 0;
  for (const auto& n : prog.news) {
    if (n.result < 0) continue;
    int64_t numel = 1;
    for (auto s : n.sizes) numel *= s;
    new_bytes += numel * static_cast<int64_t>(c10::elementSize(n.dtype));
  }
  if (new_bytes > 0) device::check_can_allocate(prog.device, new_bytes);
  auto outs = runtime::get().execute(*prog.exe, inputs);
  if (prog.donated) runtime::note_donations(prog.donated, 0);  // torch_tpu.fusion_stats()["donated"]
  for (const auto& w : prog.writes) {
    auto& sb = device::storage_buffer(tensor_at(args, w.arg, w.item).storage());
    sb.buffer = outs[w.result];
    sb.dtype = w.dtype;
  }
  std::vector<at::Tensor> news;
  news.reserve(prog.news.size());
  for (const auto& n : prog.news) {
    if (n.result < 0) {  // the op leaves this output undefined
      news.emplace_back();
      continue;
    }
    at::Tensor t = n.strides.empty() ? empty_tensor(n.sizes, n.dtype, static_cast<c10::DeviceIndex>(prog.device))
                                     : empty_strided_tensor(n.sizes, n.strides, n.dtype,
                                                            static_cast<c10::DeviceIndex>(prog.device));
    auto& sb = device::storage_buffer(t.storage());
    sb.buffer = outs[n.result];
    sb.dtype = n.dtype;
    news.push_back(std::move(t));
  }
  for (const auto& c : prog.checks) {
    if (capture::active()) capture::note_check(outs[c.result], c.check);  // a replay checks again
    runtime::defer_check(prog.device, outs[c.result], c.check);  // raises here in Debug Eager
  }
  for (const auto& ret : prog.returns) {
    if (ret.alias_arg >= 0) {
      stack->push_back(args[ret.alias_arg]);
    } else if (ret.is_list) {
      std::vector<at::Tensor> list(news.begin() + ret.first_new, news.begin() + ret.first_new + ret.num_new);
      stack->emplace_back(std::move(list));
    } else {
      stack->emplace_back(news[ret.first_new]);
    }
  }
}

// A cache miss: compiles, and says why (recompile_reason.h, recompile_log.h).
// The readable facts are built here only, never on a hit.
std::shared_ptr<Program> compile_on_miss(const c10::OperatorHandle& op, std::vector<c10::IValue>& args, int device,
                                         const std::string& key, const KeyOptions& opts,
                                         const std::vector<bool>& donate) {
  static auto* compiled_keys = new std::unordered_set<size_t>();  // hashes of keys that compiled before
  size_t key_hash = std::hash<std::string>{}(key);
  std::string name = full_name(op.schema());
  if (compiled_keys->count(key_hash)) {
    // Evicted from the LRU and needed again: same inputs, not a recompile.
    runtime::note_op_reload();
    runtime::CompileNote note("(reloaded: evicted from the program cache)", "");
    return compile_op(op, args, device, donate);
  }
  CallFacts facts = describe_call(op.schema(), args, opts);  // before compile_op resizes out= tensors
  NewProgram why = explain_new_program(name, facts);
  int64_t before = runtime::get().compile_count();
  std::shared_ptr<Program> prog;
  {
    runtime::CompileNote note("(#" + std::to_string(why.count) + " for this op)", why.reason);
    prog = compile_op(op, args, device, donate);
  }
  compiled_keys->insert(key_hash);
  remember_program(name, std::move(facts));
  // Fused mode only lowers the op (its code is compiled inside a fused
  // program, which records its own entry): nothing to record here.
  bool compiled = runtime::get().compile_count() != before;
  if (compiled || runtime::eager_mode() != runtime::EagerMode::kFused)
    runtime::record_compile({"op", name, why.reason, why.count, compiled ? "compile" : "load"});
  return prog;
}


// Per schema argument: a single tensor the op writes partly (a view that
// is not its whole storage) whose storage buffer is real, at least
// kMinDonatedBytes, and held by that storage alone, so the op's program
// may take the buffer and update the view's elements in place (compile_op).
// Without it XLA writes the whole storage anew for every slice written
// (DDP's copies into its flat gradient bucket). Outside Fused Eager only:
// a fused trace places its results itself (donation.h). Empty when no
// argument qualifies, so the key of most ops is unchanged.
std::vector<bool> donatable_writes(const OpInfo& info, const std::vector<c10::IValue>& args) {
  std::vector<bool> donate;
  static const bool enabled = [] {  // TORCH_TPU_SLICE_DONATION=0: off (to measure against)
    const char* e = std::getenv("TORCH_TPU_SLICE_DONATION");
    return !(e && std::string(e) == "0");
  }();
  if (!enabled || runtime::eager_mode() == runtime::EagerMode::kFused) return donate;
  for (size_t a = 0; a < info.num_arguments && a < args.size(); ++a) {
    if (!is_write(info.arguments[a]) || !args[a].isTensor()) continue;
    const at::Tensor& t = args[a].toTensor();
    if (!t.defined() || !t.is_privateuseone()) continue;
    const auto& sb = device::storage_buffer(t.storage());
    if (!sb.buffer || sb.buffer.use_count() != 1 || runtime::byte_size(sb.buffer->type()) < runtime::kMinDonatedBytes)
      continue;
    if (lowering::covers_storage(lowering::ViewLayout{t.sizes(), t.strides(), t.storage_offset()},
                                 device::storage_numel(t)))
      continue;  // a whole-storage write reads nothing of the old buffer
    // A lazy buffer (left by Fused Eager) wraps a real one that others may hold.
    if (runtime::resolve_buffer(sb.buffer).get() != sb.buffer.get()) continue;
    if (donate.empty()) donate.assign(args.size(), false);
    donate[a] = true;
  }
  return donate;
}

}  // namespace

at::Tensor empty_tensor(at::IntArrayRef sizes, at::ScalarType dtype, c10::DeviceIndex device) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  return at::detail::empty_generic(sizes, device::allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype, std::nullopt);
}

at::Tensor empty_strided_tensor(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype,
                                c10::DeviceIndex device) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  return at::detail::empty_strided_generic(sizes, strides, device::allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

ProgramCacheStats program_cache_stats() {
  ProgramCacheStats s = g_stats;
  s.programs = static_cast<int64_t>(cache().size());
  return s;
}

namespace {

bool is_optional_tensor_list(const c10::Argument& a) {
  const auto* list = a.type()->castRaw<c10::ListType>();
  return list != nullptr && list->getElementType()->kind() == c10::TypeKind::OptionalType;
}

}  // namespace

void run_lowered_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(std::make_move_iterator(stack->end() - n), std::make_move_iterator(stack->end()));
  stack->erase(stack->end() - n, stack->end());

  // The runtime lock (the GIL, which PyTorch's bindings released) once per
  // op, first: the per-op facts and the program cache are touched under it.
  runtime::RuntimeLock lock;
  const OpInfo& info = op_info(schema);

  // All tensors on one tpu device; 0-dim CPU tensors count as scalars, and
  // CPU index tensors (Tensor?[] lists) are uploaded, as CUDA allows. A CPU
  // tensor the op writes (self of an in-place op, out=) is refused here: it
  // reaches this kernel only through another argument (a tpu Generator, a
  // tpu tensor), and CUDA refuses it too.
  int device = -1;
  for_each_tensor(args, [&](const at::Tensor& t, int arg, int item) {
    if (t.is_privateuseone()) {
      int d = t.device().index();
      TORCH_CHECK(device < 0 || device == d,
                  "Expected all tensors to be on the same device, but found at least two devices, tpu:", device,
                  " and tpu:", d, "! (when checking arguments for ", info.name, ")");
      device = d;
    } else {
      // Beyond 0-dim tensors (scalars, also in a foreach op's list: a
      // non-capturable optimizer's CPU steps), only an index list
      // (Tensor?[]) takes CPU tensors: cat's or stack's Tensor[] does not
      // (the meta kernel then named the meta device).
      const c10::Argument& a = schema.arguments()[arg];
      bool index_list = item >= 0 && is_optional_tensor_list(a);
      TORCH_CHECK(t.device().is_cpu() && (t.dim() == 0 || index_list) && !is_write(a),
                  "Expected all tensors to be on the same device, but found at least two devices, ", t.device(),
                  " and tpu! (when checking arguments for ", info.name, ")");
    }
  });
  if (device < 0) device = device::current_device();
  if (info.checks.any()) check_args(schema, args, info.checks);  // every call: CPU's checks that meta kernels skip
  // A whole-tensor constant fill needs no program (fill.h): no compile for a new shape.
  if (info.fill != FillKind::kNone && run_host_fill(info.fill, args, device, stack)) return;

  std::string key;
  key.reserve(info.key_prefix.size() + 48 * n + 8);
  key += info.key_prefix;
  key += static_cast<char>(device);
  // The fp32 matmul precision shapes dot products: changing it recompiles.
  key += static_cast<char>('0' + static_cast<int>(lowering::matmul_precision()));
  // So do a user's XLA options (custom_compiler_options blocks).
  if (uint32_t options = runtime::compiler_options_id()) key += 'x' + std::to_string(options);
  key += '#';
  SeenStorages storages;
  lowering::WrittenStorages written = lowering::written_storages(schema, args);
  for (size_t i = 0; i < n; ++i) {
    const auto& a = schema.arguments()[i];
    append_value(key, args[i], a, info.operand[i], is_write(a) ? nullptr : &written, storages);
  }
  std::vector<bool> donate = donatable_writes(info, args);
  if (!donate.empty()) {
    key += "|d";
    for (bool d : donate) key += d ? '1' : '0';
  }

  std::shared_ptr<Program> prog;
  auto* hit = cache().find(key);
  if (hit) {
    ++g_stats.hits;
    prog = *hit;
    for (const auto& r : prog->resizes) apply_resize(args[r.arg].toTensor(), r);
  } else {
    // No rule: the opt-in CPU fallback (cpu_fallback.h) takes the op. Only
    // a miss looks, so lowered ops never pay for it.
    if (cpu_fallback_enabled() && lowering::find_rule(schema.name().substr(schema.name().find("::") + 2)) == nullptr) {
      stack->insert(stack->end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
      run_on_cpu(op, stack);
      return;
    }
    ++g_stats.misses;
    prog = compile_on_miss(op, args, device, key, KeyOptions{device, static_cast<int>(lowering::matmul_precision()),
                                                             info.static_scalars, info.runtime_floats},
                           donate);
    cache().put(key, prog);
  }
  run_program(*prog, args, stack);
}

}  // namespace torch_tpu::exec
