#include "lowering/context.h"

#include "hlo/complex_ops.h"

#include <ATen/native/TypeProperties.h>
#include <c10/util/Exception.h>

#include "device/storage.h"
#include "lowering/view.h"

namespace torch_tpu::lowering {

ElementType element_type(at::ScalarType t) {
  switch (t) {
    case at::kBool: return ElementType::kPred;
    case at::kChar: return ElementType::kI8;
    case at::kShort: return ElementType::kI16;
    case at::kInt: return ElementType::kI32;
    case at::kLong: return ElementType::kI64;
    case at::kByte: return ElementType::kU8;
    case at::kUInt32: return ElementType::kU32;
    case at::kUInt64: return ElementType::kU64;
    case at::kHalf: return ElementType::kF16;
    case at::kBFloat16: return ElementType::kBF16;
    case at::kFloat: return ElementType::kF32;
    case at::kDouble: return ElementType::kF64;
    case at::kComplexFloat: return ElementType::kC64;
    case at::kComplexDouble: return ElementType::kC128;
    case at::kFloat8_e4m3fn: return ElementType::kF8E4M3FN;
    case at::kFloat8_e5m2: return ElementType::kF8E5M2;
    case at::kFloat8_e4m3fnuz: return ElementType::kF8E4M3FNUZ;
    case at::kFloat8_e5m2fnuz: return ElementType::kF8E5M2FNUZ;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: dtype ", t, " is not supported on tpu");
  }
}

at::ScalarType scalar_type(ElementType e) {
  switch (e) {
    case ElementType::kPred: return at::kBool;
    case ElementType::kI8: return at::kChar;
    case ElementType::kI16: return at::kShort;
    case ElementType::kI32: return at::kInt;
    case ElementType::kI64: return at::kLong;
    case ElementType::kU8: return at::kByte;
    case ElementType::kU32: return at::kUInt32;
    case ElementType::kU64: return at::kUInt64;
    case ElementType::kF16: return at::kHalf;
    case ElementType::kBF16: return at::kBFloat16;
    case ElementType::kF32: return at::kFloat;
    case ElementType::kF64: return at::kDouble;
    case ElementType::kC64: return at::kComplexFloat;
    case ElementType::kC128: return at::kComplexDouble;
    case ElementType::kF8E4M3FN: return at::kFloat8_e4m3fn;
    case ElementType::kF8E5M2: return at::kFloat8_e5m2;
    case ElementType::kF8E4M3FNUZ: return at::kFloat8_e4m3fnuz;
    case ElementType::kF8E5M2FNUZ: return at::kFloat8_e5m2fnuz;
  }
  return at::kFloat;
}

WrittenStorages written_storages(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  WrittenStorages out;
  const auto& sargs = schema.arguments();
  for (size_t i = 0; i < sargs.size() && i < args.size(); ++i) {
    if (!sargs[i].alias_info() || !sargs[i].alias_info()->isWrite()) continue;
    auto note = [&](const c10::IValue& v) {
      if (v.isTensor() && v.toTensor().defined() && v.toTensor().has_storage())
        out.push_back(v.toTensor().storage().unsafeGetStorageImpl());
    };
    if (args[i].isList())
      for (const auto& e : args[i].toListRef()) note(e);
    else
      note(args[i]);
  }
  return out;
}

LowerCtx::LowerCtx(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                   std::vector<std::optional<OutputMeta>> out_meta)
    : schema_(schema), args_(args), out_meta_(std::move(out_meta)), written_(written_storages(schema, args)) {}

std::string LowerCtx::op_name() const {
  std::string s = schema_.name();
  if (!schema_.overload_name().empty()) s += "." + schema_.overload_name();
  return s;
}

int LowerCtx::index_of(std::string_view name) const {
  const auto& a = schema_.arguments();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name() == name) return static_cast<int>(i);
  return -1;
}

const c10::IValue& LowerCtx::arg(std::string_view name) const {
  int i = index_of(name);
  TORCH_CHECK(i >= 0, "torch_tpu: lowering of ", op_name(), " asked for argument '", name, "' it does not have");
  return args_[i];
}

bool LowerCtx::is_none(std::string_view name) const {
  int i = index_of(name);
  return i < 0 || args_[i].isNone() || (args_[i].isTensor() && !args_[i].toTensor().defined());
}

bool LowerCtx::is_tensor(std::string_view name) const {
  int i = index_of(name);
  return i >= 0 && args_[i].isTensor() && args_[i].toTensor().defined();
}

std::vector<int64_t> LowerCtx::ints_arg(std::string_view name) const {
  const auto& v = arg(name);
  if (v.isInt()) return {v.toInt()};
  return v.toIntVector();
}

std::optional<int64_t> LowerCtx::opt_int(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return arg(name).toInt();
}

std::optional<double> LowerCtx::opt_float(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return arg(name).toDouble();
}

std::optional<at::ScalarType> LowerCtx::opt_dtype(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return arg(name).toScalarType();
}

const at::Tensor& LowerCtx::tensor_arg(std::string_view name) const {
  TORCH_CHECK(is_tensor(name), "torch_tpu: lowering of ", op_name(), ": argument '", name, "' is not a tensor");
  return arg(name).toTensor();
}

at::ScalarType LowerCtx::dtype_of(std::string_view name) const {
  const auto& v = arg(name);
  if (v.isTensor()) return v.toTensor().scalar_type();
  if (v.isDouble()) return at::kDouble;
  if (v.isInt()) return at::kLong;
  if (v.isBool()) return at::kBool;
  if (v.isComplexDouble()) return at::kComplexDouble;
  TORCH_CHECK(false, "torch_tpu: lowering of ", op_name(), ": argument '", name, "' has no dtype");
}

const at::Tensor& LowerCtx::tensor_at(int arg, int item) const {
  const auto& v = args_[arg];
  if (item < 0) return v.toTensor();
  // Lists are materialised once per call by the execution layer, so the
  // element references stay valid.
  const auto& list = v.toListRef();
  return list[item].toTensor();
}

Value LowerCtx::storage_param(int arg, int item) {
  const at::Tensor& t = tensor_at(arg, item);
  const void* key = t.storage().unsafeGetStorageImpl();
  for (auto& [k, v] : storages_)
    if (k == key) return reinterpret_storage(v, element_type(t.scalar_type()));
  auto& sb = device::storage_buffer(t.storage());
  int64_t numel = device::storage_numel(t);
  Value v;
  if (!sb.buffer) {
    // Never written: reads as zeros, and needs no runtime operand.
    v = hlo::full(builder_, element_type(t.scalar_type()), {numel}, 0);
  } else {
    // The buffer holds the type last written; a view of another dtype
    // (view_as_real, view(dtype)) reads its bytes reinterpreted.
    int64_t stored = static_cast<int64_t>(t.storage().nbytes() / c10::elementSize(sb.dtype));
    v = builder_.parameter(hlo::TensorType{element_type(sb.dtype), {stored}});
    params_.push_back({ParamSource::kStorage, arg, item, sb.dtype});
    v = reinterpret_storage(v, element_type(t.scalar_type()));
  }
  storages_.emplace_back(key, v);
  return v;
}

Value LowerCtx::read_tensor(int arg, int item) {
  for (auto& [k, v] : reads_)
    if (k.first == arg && k.second == item) return v;
  const at::Tensor& t = tensor_at(arg, item);
  Value v;
  if (t.device().is_cpu()) {
    // A 0-dim CPU tensor mixed with tpu tensors acts as a scalar operand;
    // CPU index tensors are uploaded whole.
    v = builder_.parameter(hlo::TensorType{element_type(t.scalar_type()), t.sizes().vec()});
    params_.push_back({ParamSource::kCpuTensor, arg, item, t.scalar_type()});
  } else if (offset_is_operand(t, schema_.arguments()[arg].alias_info() && schema_.arguments()[arg].alias_info()->isWrite(),
                                written_)) {
    Value storage = storage_param(arg, item);
    Value offset = builder_.parameter(hlo::TensorType{ElementType::kI64, {}});
    params_.push_back({ParamSource::kOffset, arg, item, at::kLong});
    v = read_view_at(storage, ViewLayout{t.sizes(), t.strides(), t.storage_offset()}, offset);
  } else {
    v = read_view(storage_param(arg, item), ViewLayout{t.sizes(), t.strides(), t.storage_offset()});
  }
  // Lazy conjugate / negative views (x.conj(), x.mH, x.conj().imag) hold
  // the raw values; ops that PyTorch's Conjugate/Negative fallbacks pass
  // through untouched (mm, bmm, addmm, baddbmm, dot, vdot, ...) see them here,
  // so every rule reads the values the tensor stands for.
  if (t.is_conj()) v = hlo::conj(v);
  if (t.is_neg()) v = hlo::neg(v);
  reads_.push_back({{arg, item}, v});
  return v;
}

Value LowerCtx::tensor(std::string_view name) {
  int i = index_of(name);
  TORCH_CHECK(i >= 0 && args_[i].isTensor() && args_[i].toTensor().defined(), "torch_tpu: lowering of ", op_name(),
              ": argument '", name, "' is not a tensor");
  return read_tensor(i, -1);
}

bool is_default_scalar(const c10::Argument& a, const c10::IValue& v) {
  const auto& d = a.default_value();
  if (!d || !(d->isInt() || d->isDouble()) || !(v.isInt() || v.isDouble())) return false;
  return v.toScalar().to<double>() == d->toScalar().to<double>();
}

Value LowerCtx::operand(std::string_view name, at::ScalarType dtype) {
  int i = index_of(name);
  TORCH_CHECK(i >= 0, "torch_tpu: lowering of ", op_name(), " has no argument '", name, "'");
  const auto& v = args_[i];
  if (v.isTensor()) return hlo::convert(read_tensor(i, -1), element_type(dtype));
  TORCH_CHECK(v.isScalar(), "torch_tpu: lowering of ", op_name(), ": argument '", name, "' is neither tensor nor Scalar");
  if (is_default_scalar(schema_.arguments()[i], v)) return hlo::constant(builder_, element_type(dtype), v.toScalar().to<double>());
  std::string key(name);
  for (auto& [k, val] : scalars_)
    if (k.first == key && k.second == dtype) return val;
  Value p = builder_.parameter(hlo::TensorType{element_type(dtype), {}});
  params_.push_back({ParamSource::kScalar, i, -1, dtype});
  scalars_.push_back({{key, dtype}, p});
  return p;
}

std::vector<Value> LowerCtx::tensor_list(std::string_view name) {
  int i = index_of(name);
  TORCH_CHECK(i >= 0, "torch_tpu: lowering of ", op_name(), " has no argument '", name, "'");
  std::vector<Value> out;
  const auto& list = args_[i].toListRef();
  for (size_t k = 0; k < list.size(); ++k) {
    if (list[k].isTensor() && list[k].toTensor().defined())
      out.push_back(read_tensor(i, static_cast<int>(k)));
    else
      out.emplace_back();
  }
  return out;
}

Value LowerCtx::rng_key() {
  if (rng_.valid()) return rng_;
  Value pair = builder_.parameter(hlo::TensorType{ElementType::kU64, {2}});
  params_.push_back({ParamSource::kRngKey, index_of("generator"), -1, at::kUInt64});
  // The generator hands out (seed, offset) with the offset advancing by one
  // per call. ThreeFry reads the second word as a counter, so used directly
  // consecutive calls would see one stream shifted by a block. One ThreeFry
  // block of the pair (a bijection of offset for a fixed seed) becomes the
  // key of a fresh stream starting at counter 0.
  Value hashed = hlo::rng_bit_generator(pair, {1}, ElementType::kU64).second;
  rng_ = hlo::concatenate({hashed, hlo::full(builder_, ElementType::kU64, {1}, 0)}, 0);
  return rng_;
}

std::optional<at::ScalarType> LowerCtx::out_dtype(int i) const {
  if (i >= num_outputs() || !out_meta_[i] || !out_meta_[i]->defined) return std::nullopt;
  return out_meta_[i]->dtype;
}

std::optional<std::vector<int64_t>> LowerCtx::out_sizes(int i) const {
  if (i >= num_outputs() || !out_meta_[i] || !out_meta_[i]->defined) return std::nullopt;
  return out_meta_[i]->sizes;
}

at::ScalarType LowerCtx::result_type(std::initializer_list<std::string_view> names) const {
  at::native::ResultTypeState state;
  for (auto name : names) {
    if (is_none(name)) continue;
    const auto& v = arg(name);
    if (v.isTensor())
      state = at::native::update_result_type_state(v.toTensor(), state);
    else
      state = at::native::update_result_type_state(v.toScalar(), state);
  }
  common_dtype_ = at::native::result_type(state);
  return *common_dtype_;
}

}  // namespace torch_tpu::lowering
