#include "lowering/index_check.h"

#include <limits>
#include <sstream>

#include "hlo/ops.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

std::string base_name(const LowerCtx& ctx) {
  std::string n = ctx.schema().name();
  n = n.substr(n.find("::") + 2);
  if (n.size() > 1 && n.back() == '_' && n[n.size() - 2] != '_') n.pop_back();  // index_add_ -> index_add
  if (n == "_index_put_impl") return "index_put";  // x[i] = v and index_put_ reach it
  return n;
}

// CPU's exception type for an out-of-range index: RuntimeError for the
// gather/scatter family (their CPU kernels use TORCH_CHECK), IndexError
// for the rest.
CheckError cpu_bounds_error(const std::string& op) {
  return op.rfind("gather", 0) != 0 && op.rfind("scatter", 0) != 0 ? CheckError::kIndex : CheckError::kRuntime;
}

// [any(bad), max of the bad indices] as tensor<2xi64>.
Value make_flag(Value bad, Value idx) {
  Builder& b = idx.builder();
  int64_t n = idx.type().numel();
  Value bad1 = hlo::reshape(bad, {n});
  Value idx1 = hlo::reshape(idx, {n});
  Value any = hlo::reduce(hlo::convert(bad1, ElementType::kI64), {0}, hlo::ReduceKind::kMax);
  Value min64 = hlo::broadcast_in_dim(hlo::constant_int(b, ElementType::kI64, std::numeric_limits<int64_t>::min()),
                                      {n}, {});
  Value worst = hlo::reduce(hlo::select(bad1, idx1, min64), {0}, hlo::ReduceKind::kMax);
  return hlo::concatenate({hlo::reshape(any, {1}), hlo::reshape(worst, {1})}, 0);
}

// A check with its own message (check_data, torch._assert_async below)
// carries it in `op` and this dim, which no index check has (their dims are
// >= 0), so that DeviceCheck (lowering/context.h, included by every
// lowering) keeps its fields; kValueMessageDim: with the offending value
// in place of its "{}" (an assert's own message is left as it is).
constexpr int64_t kMessageDim = -1, kValueMessageDim = -2;

DeviceCheck message_check(Value bad, Value idx, std::string message, CheckError error, bool with_value = false) {
  DeviceCheck c;
  c.flag = make_flag(bad, idx);
  c.kind = CheckKind::kIndexBounds;  // unused: the dim selects the message
  c.dim = with_value ? kValueMessageDim : kMessageDim;
  c.op = std::move(message);
  c.error = error;
  return c;
}

constexpr const char* deferred_note =
    "\n[torch_tpu reports errors found on the device at the next synchronisation (.item(), .cpu(), "
    "printing, torch.tpu.synchronize()), so the failing op ran earlier; TPU_LAUNCH_BLOCKING=1 raises at the op]";

}  // namespace

Value checked_index(LowerCtx& ctx, Value idx, int64_t dim, int64_t size, CheckKind kind, Negative neg) {
  Builder& b = idx.builder();
  idx = hlo::convert(idx, ElementType::kI64);
  const Dims& dims = idx.dims();
  Value zero = hlo::full(b, ElementType::kI64, dims, 0);
  Value sz = hlo::full(b, ElementType::kI64, dims, static_cast<double>(size));
  Value is_neg = hlo::compare(idx, zero, "LT");
  Value wrapped = hlo::select(is_neg, hlo::add(idx, sz), idx);
  if (size == 0 && idx.type().numel() > 0) {
    // Every index is out of range, whatever its value: raise at the op (the
    // gather from an empty dimension would not even compile).
    std::string op = base_name(ctx);
    CheckError error = kind == CheckKind::kIndexBounds ? cpu_bounds_error(op) : CheckError::kIndex;
    std::string msg = op + "(): index is out of bounds for dimension " + std::to_string(dim) + " with size 0";
    if (kind == CheckKind::kIndexInSelf) {  // CPU's type and words for index_select (embedding)
      error = CheckError::kRuntime;
      msg = op + "(): self indexing axis dim should be positive (dimension " + std::to_string(dim) + " has size 0)";
    }
    if (error == CheckError::kIndex) TORCH_CHECK_INDEX(false, msg);
    TORCH_CHECK(false, msg);
  }
  if (idx.type().numel() > 0) {
    // Out of range: the wrapped index outside [0, size), or any negative
    // index where CPU rejects them.
    Value bad = hlo::binary("or", hlo::compare(wrapped, zero, "LT"), hlo::compare(wrapped, sz, "GE"));
    if (neg == Negative::kReject) bad = hlo::binary("or", bad, is_neg);
    DeviceCheck c;
    c.flag = make_flag(bad, idx);
    c.kind = kind;
    c.op = base_name(ctx);
    c.dim = dim;
    c.size = size;
    c.error = kind == CheckKind::kIndexBounds ? cpu_bounds_error(c.op) : CheckError::kIndex;
    ctx.add_check(std::move(c));
  }
  return wrapped;
}

void add_check(LowerCtx& ctx, Value bad, Value idx, CheckKind kind, int64_t dim, int64_t size, CheckError error) {
  if (idx.type().numel() == 0) return;
  DeviceCheck c;
  c.flag = make_flag(bad, hlo::convert(idx, ElementType::kI64));
  c.kind = kind;
  c.op = base_name(ctx);
  c.dim = dim;
  c.size = size;
  c.error = error;
  ctx.add_check(std::move(c));
}

void check_data(LowerCtx& ctx, Value bad, std::string message, Value idx, CheckError error) {
  if (bad.type().numel() == 0) return;
  Value v = idx.valid() ? hlo::convert(idx, ElementType::kI64) : hlo::full(bad.builder(), ElementType::kI64, bad.dims(), 0);
  ctx.add_check(message_check(bad, v, std::move(message), error, idx.valid()));
}

void check_nonzero(LowerCtx& ctx, Value d) {
  if (hlo::is_float(d.element()) || hlo::is_complex(d.element()) || d.element() == ElementType::kPred) return;
  if (d.type().numel() == 0) return;
  Value zero = hlo::zeros_like(d);
  Value bad = hlo::compare(d, zero, "EQ");
  DeviceCheck c;
  c.flag = make_flag(bad, hlo::convert(d, ElementType::kI64));
  c.kind = CheckKind::kZeroDivision;
  c.op = base_name(ctx);
  c.error = CheckError::kRuntime;
  ctx.add_check(std::move(c));
}

std::string check_message(const DeviceCheck& c, int64_t value, bool deferred) {
  std::ostringstream os;
  if (c.dim == kMessageDim || c.dim == kValueMessageDim) {
    std::string m = c.op;  // CPU's message
    size_t at = c.dim == kValueMessageDim ? m.find("{}") : std::string::npos;
    if (at != std::string::npos) m.replace(at, 2, std::to_string(value));
    os << m;
    if (deferred) os << deferred_note;
    return os.str();
  }
  os << c.op << "(): ";
  switch (c.kind) {
    case CheckKind::kIndexInSelf:
      os << "index " << value << " is out of range for dimension " << c.dim << " with size " << c.size
         << " (index out of range in self)";
      break;
    case CheckKind::kIndexBounds:
      os << "index " << value << " is out of bounds for dimension " << c.dim << " with size " << c.size;
      break;
    case CheckKind::kTakeBounds:
      os << "out of range: tried to access index " << value << " on a tensor of " << c.size << " elements.";
      break;
    case CheckKind::kZeroDivision:
      os << "ZeroDivisionError (integer division by zero)";
      break;
    case CheckKind::kTargetBounds:
      os << "Target " << value << " is out of bounds (" << c.size << " classes).";
      break;
    case CheckKind::kBagIndex:
      os << "an index of input takes value " << value << " which is not in the valid range [0, " << c.size << ")";
      break;
  }
  if (deferred) os << deferred_note;
  return os.str();
}

// torch._assert_async(cond[, msg]) and the functionalised
// _functional_assert_async.msg(cond, msg, dep_token) -> dep_token, which
// Dynamo emits for `assert` on tensor data and torch._check on a tensor:
// a check on the device like the index checks, raised (RuntimeError, with
// CPU's message) at the next synchronisation instead of a host read of
// `cond` at the op. `cond` must hold one element (CPU's is_nonzero
// checks it on the host too: sizes are known when lowering).
TPU_LOWERING(_assert_async) {
  Value cond = ctx.tensor("self");
  int64_t n = cond.type().numel();
  TORCH_CHECK(n != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(n == 1, "Boolean value of Tensor with more than one value is ambiguous");
  Value zero = hlo::full_like(cond, 0);
  Value bad = hlo::compare(cond, zero, "EQ");
  std::string msg = ctx.has("assert_msg") && !ctx.is_none("assert_msg") ? ctx.str_arg("assert_msg") : "";
  if (!ctx.has("assert_msg"))
    msg = "Expected Tensor with single nonzero value, but got zero";
  else if (msg.empty())
    msg = "Assertion is failed";
  ctx.add_check(message_check(bad, hlo::full(cond.builder(), ElementType::kI64, cond.dims(), 0), msg, CheckError::kRuntime));
  if (ctx.has("dep_token")) return {ctx.tensor("dep_token")};
  return {};
}
TPU_LOWERING_ALIAS(_functional_assert_async, _assert_async);

}  // namespace torch_tpu::lowering
