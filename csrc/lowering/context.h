// What a lowering rule sees: the op's arguments by schema name, turned into
// StableHLO values on demand, and what PyTorch's meta kernel said about the
// outputs. The rule returns one value per op result; the execution layer
// converts each to the output's dtype and shape and stores it (new tensor,
// in-place or out=).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hlo/ops.h"

namespace torch_tpu::lowering {

using hlo::Builder;
using hlo::Dims;
using hlo::ElementType;
using hlo::Value;

ElementType element_type(at::ScalarType t);
at::ScalarType scalar_type(ElementType e);

// Where each runtime operand of a program comes from, in parameter order.
struct ParamSource {
  // kOffset: the storage offset of tensor (arg, item), as an i64 scalar.
  enum Kind { kStorage, kScalar, kCpuTensor, kRngKey, kOffset } kind;
  int arg = -1;         // schema argument index
  int item = -1;        // position inside a Tensor[] argument, else -1
  at::ScalarType dtype = at::ScalarType::Undefined;  // kScalar/kCpuTensor: upload type
};

struct OutputMeta {
  at::ScalarType dtype = at::ScalarType::Undefined;
  std::vector<int64_t> sizes;
  // False where the op returns None / an undefined tensor (e.g. a gradient
  // that output_mask leaves out): the rule's value there is dropped.
  bool defined = true;
  // The meta kernel's strides when they are a dense permutation other than
  // contiguous (a channels-last convolution, relu of a transposed tensor):
  // the new tensor takes them, as CPU's does. Empty: contiguous.
  std::vector<int64_t> strides = {};
};

// A Scalar argument left at its schema's default (add's alpha=1, addmm's
// beta=1, addcmul's value=1): the program holds it as a constant, so XLA
// can fold the multiply by one away (and with it, e.g., rewrite
// `a + scatter(zeros, ...)` into a scatter into `a`). Any other value is a
// runtime operand; the program key says which (op_runner.cpp).
bool is_default_scalar(const c10::Argument& a, const c10::IValue& v);

// A check on data the rule computes on the device (lowering/index_check.h,
// runtime/deferred_checks.h): `flag` is a tensor<2xi64> [failed, value],
// one more result of the op's program.
enum class CheckKind {
  kIndexInSelf,    // IndexError "index out of range in self" (index_select, embedding, index_add)
  kIndexBounds,    // "index 7 is out of bounds for dimension 0 with size 5" (gather, scatter, x[i])
  kTakeBounds,     // IndexError "out of range: tried to access index 7 on a tensor of 5 elements." (take, put)
  kZeroDivision,   // RuntimeError "ZeroDivisionError" (integer division, remainder, fmod)
  kTargetBounds,   // IndexError "Target 5 is out of bounds." (nll_loss)
  kBagIndex,       // RuntimeError "... takes value 7 which is not in the valid range [0, 5)" (embedding_bag)
};
// The Python exception a failed check raises: CPU's type for the op.
enum class CheckError {
  kRuntime,  // RuntimeError
  kIndex,    // IndexError
  kLinAlg,   // torch.linalg.LinAlgError (a matrix CPU cannot factor or invert)
};
struct DeviceCheck {
  Value flag;
  CheckKind kind = CheckKind::kIndexBounds;
  std::string op;            // the ATen op without namespace, e.g. "index_select"
  int64_t dim = 0, size = 0; // the dimension indexed and its size (elements, for take)
  CheckError error = CheckError::kIndex;
};

// The storages an op writes: those of its mutable (in-place, out=)
// arguments.
using WrittenStorages = std::vector<const void*>;
WrittenStorages written_storages(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

// Whether a program reads tensor `t` at a runtime offset: a tpu tensor at a
// nonzero storage offset, in an argument the op does not write
// (`arg_is_written`), whose storage the op writes nowhere. Then the program
// does not hold the offset (the key marks it nonzero), so `x[i] * 2` for
// every i runs one program. Written tensors and tensors aliasing them keep
// theirs: write-backs and overlap checks read them. The program key
// (exec/op_runner.cpp) and LowerCtx decide alike through this.
inline bool offset_is_operand(const at::Tensor& t, bool arg_is_written, const WrittenStorages& written) {
  if (arg_is_written || !t.is_privateuseone() || t.storage_offset() == 0) return false;
  const void* impl = t.storage().unsafeGetStorageImpl();
  for (const void* w : written)
    if (w == impl) return false;
  return true;
}

class LowerCtx {
 public:
  LowerCtx(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
           std::vector<std::optional<OutputMeta>> out_meta);

  Builder& b() { return builder_; }
  const c10::FunctionSchema& schema() const { return schema_; }
  // "aten::add.Tensor", for messages.
  std::string op_name() const;

  // ---- arguments by name --------------------------------------------------
  bool has(std::string_view name) const { return index_of(name) >= 0; }
  // Absent from the schema, or None.
  bool is_none(std::string_view name) const;
  bool is_tensor(std::string_view name) const;
  const c10::IValue& arg(std::string_view name) const;
  int64_t int_arg(std::string_view name) const { return arg(name).toInt(); }
  double float_arg(std::string_view name) const { return arg(name).toDouble(); }
  bool bool_arg(std::string_view name) const { return arg(name).toBool(); }
  std::vector<int64_t> ints_arg(std::string_view name) const;
  std::optional<int64_t> opt_int(std::string_view name) const;
  std::optional<double> opt_float(std::string_view name) const;
  std::optional<at::ScalarType> opt_dtype(std::string_view name) const;
  std::string str_arg(std::string_view name) const { return arg(name).toStringRef(); }
  // The real tpu tensor behind an argument (sizes, dtype, strides).
  const at::Tensor& tensor_arg(std::string_view name) const;
  // The value's dtype: a tensor's, or a Scalar's as PyTorch types it
  // (Long, Double, Bool, ComplexDouble).
  at::ScalarType dtype_of(std::string_view name) const;

  // ---- values -------------------------------------------------------------
  // The dense contents of a tensor argument (its view read from storage).
  Value tensor(std::string_view name);
  // A tensor or Scalar argument as a value of `dtype` (Scalars become rank-0
  // runtime operands, so changing a Scalar never recompiles).
  Value operand(std::string_view name, at::ScalarType dtype);
  // Elements of a Tensor[] / Tensor?[] argument; absent entries are invalid
  // Values.
  std::vector<Value> tensor_list(std::string_view name);
  // A random key (tensor<2xui64>) fed from the op's generator: a fresh,
  // independent stream for every call of the op.
  Value rng_key();

  // ---- outputs ----------------------------------------------------------------
  int num_outputs() const { return static_cast<int>(out_meta_.size()); }
  // dtype / sizes of output i from the meta kernel (nullopt if unknown or
  // if the op leaves that output undefined).
  std::optional<at::ScalarType> out_dtype(int i = 0) const;
  std::optional<std::vector<int64_t>> out_sizes(int i = 0) const;
  // PyTorch's promoted type of the named tensor/Scalar arguments. The rule's
  // last answer is kept (`common_dtype`): TensorIterator casts every tensor
  // operand to it before the kernel computes (ew::in follows that).
  at::ScalarType result_type(std::initializer_list<std::string_view> names) const;
  std::optional<at::ScalarType> common_dtype() const { return common_dtype_; }

  // ---- device-side checks (index_check.h) -------------------------------------
  void add_check(DeviceCheck c) { checks_.push_back(std::move(c)); }
  const std::vector<DeviceCheck>& checks() const { return checks_; }

  // ---- used by the execution layer -----------------------------------------
  int index_of(std::string_view name) const;
  // Parameter holding the whole storage of tensor argument (arg, item).
  Value storage_param(int arg, int item);
  const std::vector<ParamSource>& params() const { return params_; }
  const at::Tensor& tensor_at(int arg, int item) const;

 private:
  Value read_tensor(int arg, int item);

  const c10::FunctionSchema& schema_;
  const std::vector<c10::IValue>& args_;
  std::vector<std::optional<OutputMeta>> out_meta_;
  Builder builder_;
  std::vector<ParamSource> params_;
  // Storage params already created, by StorageImpl (so aliases share one).
  std::vector<std::pair<const void*, Value>> storages_;
  std::vector<std::pair<std::pair<int, int>, Value>> reads_;
  std::vector<std::pair<std::pair<std::string, at::ScalarType>, Value>> scalars_;
  Value rng_;
  std::vector<DeviceCheck> checks_;
  WrittenStorages written_;
  mutable std::optional<at::ScalarType> common_dtype_;
};

}  // namespace torch_tpu::lowering
