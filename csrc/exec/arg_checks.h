// Argument checks that PyTorch's CPU kernels make but the meta kernels the
// engine relies on do not: out= memory overlap, a few value ranges of the
// random ops, the overflow check of fill values (fill_, masked_fill,
// index_fill) and cat's 0-dim tensors (its meta kernel raises IndexError).
// Also the checks of Scalar values that C++ meta functions make (pow's
// integer exponent, renorm's norms, elu/leaky_relu backward's slope): the
// meta kernel runs once per program, and a Scalar is a runtime operand.
// And the dtypes CPU's rounded division refuses (complex, bool), with CPU's error
// type, where PyTorch's meta raises a RuntimeError.
// They run on every call, before the program cache lookup, so a cached
// program never skips them.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

namespace torch_tpu::exec {

// Which of the checks an op needs, worked out once per op (op_runner's
// per-op facts): most ops need none, and then check_args costs a branch.
struct ArgCheckPlan {
  bool out_overlap = false;   // has out= arguments
  bool full_overlap = false;  // ... and its CPU kernel rejects an out= that is an input
  enum Values : uint8_t { kNone, kUniform, kFill, kBernoulli, kCat, kPow, kRenorm, kSlopeBackward, kRoundedDiv } values = kNone;
  bool any() const { return out_overlap || values != kNone; }
};
ArgCheckPlan plan_arg_checks(const c10::FunctionSchema& schema);

// Raises the error CPU raises for these arguments (RuntimeError, with CPU's
// message), or returns.
void check_args(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, const ArgCheckPlan& plan);
inline void check_args(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  check_args(schema, args, plan_arg_checks(schema));
}

// The argument named `name` in `args` (the op's arguments in schema order),
// or nullptr.
const c10::IValue* find_arg(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                            const char* name);

}  // namespace torch_tpu::exec
