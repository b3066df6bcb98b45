// Factories whose values are computed on device (arange, linspace, logspace,
// eye).
// empty/zeros/ones/full need no rule: they are empty + fill_/zero_.
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

// Index-based sequences are computed in 64-bit like PyTorch's CPU kernels
// (accscalar_t is double / int64 there), then cast to the output dtype.
at::ScalarType accumulate_type(at::ScalarType out) {
  return c10::isFloatingType(out) ? at::kDouble : at::kLong;
}

// arange.start_out(start, end, step, *, out): the meta kernel sized `out`.
TPU_LOWERING(arange) {
  auto out = *ctx.out_dtype();
  auto acc = accumulate_type(out);
  auto dims = *ctx.out_sizes();
  Value idx = hlo::iota(ctx.b(), element_type(acc), dims, 0);
  Value start = hlo::broadcast_to(ctx.operand("start", acc), dims);
  Value step = hlo::broadcast_to(ctx.operand("step", acc), dims);
  return {hlo::add(start, hlo::mul(idx, step))};
}

// Evenly spaced values from start to end in `acc`, like PyTorch: the first
// half counts up from start and the second half down from end, so both ends
// are exact.
// `endpoints`: the type start and end are first cast to.
Value evenly_spaced(LowerCtx& ctx, at::ScalarType acc, at::ScalarType endpoints) {
  auto dims = *ctx.out_sizes();
  int64_t steps = ctx.int_arg("steps");
  auto e = element_type(acc);
  auto& b = ctx.b();
  Value start = hlo::broadcast_to(hlo::convert(ctx.operand("start", endpoints), e), dims);
  if (steps == 1) return start;
  Value end = hlo::broadcast_to(hlo::convert(ctx.operand("end", endpoints), e), dims);
  Value idx = hlo::iota(b, e, dims, 0);
  double denom = steps > 1 ? static_cast<double>(steps - 1) : 1.0;
  // The barrier keeps XLA from turning the division by a constant into a
  // multiplication by its (inexact) reciprocal: 49 / 49 must stay 1.
  Value divisor = b.emit("optimization_barrier", {hlo::full(b, e, dims, denom)}, hlo::TensorType{e, dims});
  Value step = hlo::div(hlo::sub(end, start), divisor);
  Value up = hlo::add(start, hlo::mul(idx, step));
  Value down = hlo::sub(end, hlo::mul(hlo::sub(hlo::full(b, e, dims, steps - 1), idx), step));
  Value first_half = hlo::compare(idx, hlo::full(b, e, dims, static_cast<double>(steps / 2)), "LT");
  return hlo::select(first_half, up, down);
}

// CPU computes float sequences in float itself (double only for double).
at::ScalarType sequence_type(at::ScalarType out) {
  return out == at::kDouble || !c10::isFloatingType(out) ? at::kDouble : at::kFloat;
}

}  // namespace

// linspace.out(start, end, steps, *, out)
TPU_LOWERING(linspace) {
  // Integer outputs: integer start/end, steps in double, truncated.
  auto out = *ctx.out_dtype();
  return {evenly_spaced(ctx, sequence_type(out), c10::isIntegralType(out, true) ? at::kLong : sequence_type(out))};
}

// logspace.out(start, end, steps, base, *, out): base ** linspace, as CPU
// computes it: start and end first cast to the output type (integers then
// computed in double), reduced floats computed in float.
TPU_LOWERING(logspace) {
  auto out = *ctx.out_dtype();
  bool integral = c10::isIntegralType(out, true);
  // One step: CPU fills pow(base, start) computed in double.
  Value exponent = ctx.int_arg("steps") == 1
                       ? hlo::broadcast_to(ctx.operand("start", at::kDouble), *ctx.out_sizes())
                       : evenly_spaced(ctx, integral ? at::kDouble : sequence_type(out), out);
  Value base = hlo::full_like(exponent, ctx.float_arg("base"));
  return {hlo::binary("power", base, exponent)};
}

// Autograd's zero gradients (a ZeroTensor on CPU/CUDA): plain zeros here.
TPU_LOWERING(_efficientzerotensor) {
  return {hlo::full(ctx.b(), element_type(*ctx.out_dtype()), *ctx.out_sizes(), 0)};
}

// eye.m_out(n, m, *, out)
TPU_LOWERING(eye) {
  auto dims = *ctx.out_sizes();
  auto& b = ctx.b();
  Value rows = hlo::iota(b, hlo::ElementType::kI64, dims, 0);
  Value cols = hlo::iota(b, hlo::ElementType::kI64, dims, 1);
  return {hlo::compare(rows, cols, "EQ")};
}

}  // namespace torch_tpu::lowering
