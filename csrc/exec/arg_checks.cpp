#include "exec/arg_checks.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/result_type.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>
#include <string>
#include <string_view>

namespace torch_tpu::exec {

namespace {

template <typename F>
void for_each_defined(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) f(v.toTensor());
  } else if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (e.isTensor() && e.toTensor().defined()) f(e.toTensor());
  }
}

// Ops whose CPU kernels reject an out= tensor that is one of the inputs
// (at::assert_no_overlap). Elsewhere (TensorIterator ops and the rest) only a
// partial overlap is an error: `torch.add(a, b, out=a)` is legal.
bool rejects_full_overlap(std::string_view op) {
  return op == "aten::cat" || op == "aten::gather" || op == "aten::index_select" || op == "aten::take" ||
         op == "aten::masked_select" || op == "aten::index";
}

// out= arguments: no element written twice, no input read while written.
// In-place ops (self written and read) are not out= arguments.
void check_out_overlap(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, bool full) {
  const auto& sargs = schema.arguments();
  for (size_t o = 0; o < sargs.size() && o < args.size(); ++o) {
    if (!sargs[o].is_out()) continue;
    for_each_defined(args[o], [&](const at::Tensor& out) {
      at::assert_no_internal_overlap(out);
      for (size_t i = 0; i < sargs.size() && i < args.size(); ++i) {
        if (sargs[i].is_out()) continue;
        for_each_defined(args[i], [&](const at::Tensor& in) {
          if (full)
            at::assert_no_overlap(out, in);
          else
            at::assert_no_partial_overlap(out, in);
        });
      }
    });
  }
}

const at::Tensor* first_tensor(const std::vector<c10::IValue>& args) {
  for (const auto& v : args)
    if (v.isTensor() && v.toTensor().defined()) return &v.toTensor();
  return nullptr;
}

// Value checks that CPU's kernels make and the meta kernels skip (the other
// random ops' meta kernels check their parameters themselves).
void check_values(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, ArgCheckPlan::Values which) {
  if (which == ArgCheckPlan::kUniform) {
    const c10::IValue* from = find_arg(schema, args, "from");
    const c10::IValue* to = find_arg(schema, args, "to");
    if (!from || !to || !from->isDouble() || !to->isDouble()) return;
    double f = from->toDouble(), t = to->toDouble();
    TORCH_CHECK(f <= t, "uniform_ expects to return a [from, to) range, but found from=", f, " > to=", t);
    const at::Tensor* self = first_tensor(args);
    if (self && at::isFloatingType(self->scalar_type())) {
      at::ScalarType st = self->scalar_type();
      double limit = st == at::kDouble     ? std::numeric_limits<double>::max()
                     : st == at::kFloat    ? std::numeric_limits<float>::max()
                     : st == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::max())
                                           : static_cast<double>(std::numeric_limits<c10::Half>::max());
      TORCH_CHECK(t - f <= limit, "uniform_ expects to-from <= std::numeric_limits<", at::toString(st),
                  ">::max(), but found to=", t, " and from=", f, " which result in to-from to exceed the limit");
    }
  } else if (which == ArgCheckPlan::kFill) {
    // CPU converts the fill value to self's dtype with an overflow check
    // (Scalar::to<T>: "value cannot be converted to type uint8_t without
    // overflow"); the value is a runtime operand, so no meta kernel or rule
    // sees it.
    const c10::IValue* value = find_arg(schema, args, "value");
    const at::Tensor* self = first_tensor(args);
    if (!value || !value->isScalar() || !self) return;
    c10::Scalar v = value->toScalar();
    AT_DISPATCH_V2(self->scalar_type(), "fill", AT_WRAP([&] { (void)v.to<scalar_t>(); }), AT_EXPAND(AT_ALL_TYPES),
                   AT_EXPAND(AT_COMPLEX_TYPES), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                   AT_EXPAND(AT_FLOAT8_TYPES));
  } else if (which == ArgCheckPlan::kCat) {
    // CPU's words; PyTorch's meta kernel raises "list assignment index out
    // of range" (IndexError) for a 0-dim tensor
    const c10::IValue* tensors = find_arg(schema, args, "tensors");
    if (!tensors || !tensors->isTensorList()) return;
    auto list = tensors->toTensorList();
    for (size_t i = 0; i < list.size(); ++i)
      TORCH_CHECK(list.get(i).dim() != 0, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
  } else if (which == ArgCheckPlan::kPow) {
    const c10::IValue* e = find_arg(schema, args, "exponent");
    const at::Tensor* self = first_tensor(args);
    if (!e || !e->isScalar() || !self) return;
    c10::Scalar v = e->toScalar();
    TORCH_CHECK(!(at::isIntegralType(self->scalar_type(), true) && v.isIntegral(true) && v.toLong() < 0),
                "Integers to negative integer powers are not allowed.");
  } else if (which == ArgCheckPlan::kRenorm) {
    const c10::IValue* p = find_arg(schema, args, "p");
    const c10::IValue* maxnorm = find_arg(schema, args, "maxnorm");
    if (!p || !maxnorm || !p->isScalar() || !maxnorm->isScalar()) return;
    TORCH_CHECK(p->toScalar().toDouble() > 0.0, "renorm: non-positive-norm not supported");
    TORCH_CHECK(maxnorm->toScalar().toDouble() >= 0.0, "renorm: expected maxnorm to be >= 0 but got ",
                maxnorm->toScalar().toDouble());
  } else if (which == ArgCheckPlan::kSlopeBackward) {
    bool elu = schema.name() == "aten::elu_backward";
    const c10::IValue* is_result = find_arg(schema, args, elu ? "is_result" : "self_is_result");
    const c10::IValue* slope = find_arg(schema, args, elu ? "alpha" : "negative_slope");
    if (!is_result || !slope || !is_result->isBool() || !slope->isScalar() || !is_result->toBool()) return;
    TORCH_CHECK(slope->toScalar().toDouble() >= 0.0, "In-place ", elu ? "elu" : "leakyReLu",
                " backward calculation is triggered with a negative slope which is not supported. "
                "This is caused by calling in-place forward function with a negative slope, "
                "please call out-of-place version instead.",
                elu ? "" : " File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place "
                           "leakRelu backward calculation with negative slope");
  } else if (which == ArgCheckPlan::kRoundedDiv) {
    // Rounding a complex or bool quotient: CPU and CUDA have no kernel
    // (NotImplementedError, "div_floor_cpu" not implemented for
    // 'ComplexFloat'); PyTorch's meta kernel raised a RuntimeError of its own.
    std::string mode = "floor";
    if (schema.name() == "aten::div" || schema.name() == "aten::div_") {
      const c10::IValue* m = find_arg(schema, args, "rounding_mode");
      if (!m || !m->isString()) return;
      mode = m->toStringRef();
    }
    // Named by the quotient's dtype, as CPU names it.
    const c10::IValue* self = find_arg(schema, args, "self");
    const c10::IValue* other = find_arg(schema, args, "other");
    if (!self || !other || !self->isTensor()) return;
    at::ScalarType quotient = other->isTensor() ? at::result_type(self->toTensor(), other->toTensor())
                              : other->isScalar() ? at::result_type(self->toTensor(), other->toScalar())
                                                  : self->toTensor().scalar_type();
    TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(quotient) && quotient != at::kBool, "\"div_", mode, "_tpu\" not implemented for '",
                                c10::toString(quotient), "'");
  } else if (which == ArgCheckPlan::kBernoulli) {
    const c10::IValue* p = find_arg(schema, args, "p");
    if (!p || !p->isDouble()) return;  // a tensor p would need a device read
    double v = p->toDouble();
    TORCH_CHECK(0 <= v && v <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", v);
  }
}

}  // namespace

const c10::IValue* find_arg(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                            const char* name) {
  const auto& sargs = schema.arguments();
  for (size_t i = 0; i < sargs.size() && i < args.size(); ++i)
    if (sargs[i].name() == name) return &args[i];
  return nullptr;
}

ArgCheckPlan plan_arg_checks(const c10::FunctionSchema& schema) {
  ArgCheckPlan p;
  for (const auto& a : schema.arguments()) p.out_overlap |= a.is_out();
  p.full_overlap = p.out_overlap && rejects_full_overlap(schema.name());
  const std::string& op = schema.name();
  if (op == "aten::uniform" || op == "aten::uniform_") {
    p.values = ArgCheckPlan::kUniform;
  } else if (op == "aten::fill_" || op == "aten::fill" || op == "aten::masked_fill" || op == "aten::masked_fill_" ||
             op == "aten::index_fill" || op == "aten::index_fill_") {
    p.values = ArgCheckPlan::kFill;
  } else if (op == "aten::bernoulli" || op == "aten::bernoulli_") {
    p.values = ArgCheckPlan::kBernoulli;
  } else if (op == "aten::cat") {
    p.values = ArgCheckPlan::kCat;
  } else if (op == "aten::pow" || op == "aten::pow_") {
    p.values = ArgCheckPlan::kPow;
  } else if (op == "aten::renorm" || op == "aten::renorm_") {
    p.values = ArgCheckPlan::kRenorm;
  } else if (op == "aten::floor_divide" || op == "aten::floor_divide_" ||
             ((op == "aten::div" || op == "aten::div_") && schema.overload_name().find("mode") != std::string::npos)) {
    p.values = ArgCheckPlan::kRoundedDiv;
  } else if (op == "aten::elu_backward" || op == "aten::leaky_relu_backward") {
    p.values = ArgCheckPlan::kSlopeBackward;
  }
  return p;
}

void check_args(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, const ArgCheckPlan& plan) {
  if (plan.out_overlap) check_out_overlap(schema, args, plan.full_overlap);
  if (plan.values != ArgCheckPlan::kNone) check_values(schema, args, plan.values);
}

}  // namespace torch_tpu::exec
