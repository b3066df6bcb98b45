// Factories whose values are computed on device (arange, linspace, eye).
// empty/zeros/ones/full need no rule: they are empty + fill_/zero_.
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

// Index-based sequences are computed in 64-bit like PyTorch's CPU kernels
// (accscalar_t is double / int64 there), then cast to the output dtype.
at::ScalarType accumulate_type(at::ScalarType out) {
  return c10::isFloatingType(out) ? at::kDouble : at::kLong;
}

}  // namespace

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

// linspace.out(start, end, steps, *, out): like PyTorch, the first half
// counts up from start and the second half down from end, so both ends
// are exact.
TPU_LOWERING(linspace) {
  auto out = *ctx.out_dtype();
  auto dims = *ctx.out_sizes();
  int64_t steps = ctx.int_arg("steps");
  // CPU computes float linspace in float itself (double only for double).
  auto acc = out == at::kDouble || !c10::isFloatingType(out) ? at::kDouble : at::kFloat;
  auto e = element_type(acc);
  auto& b = ctx.b();
  Value start = hlo::broadcast_to(ctx.operand("start", acc), dims);
  if (steps == 1) return {start};
  Value end = hlo::broadcast_to(ctx.operand("end", acc), dims);
  Value idx = hlo::iota(b, e, dims, 0);
  double denom = steps > 1 ? static_cast<double>(steps - 1) : 1.0;
  Value step = hlo::div(hlo::sub(end, start), hlo::full(b, e, dims, denom));
  Value up = hlo::add(start, hlo::mul(idx, step));
  Value down = hlo::sub(end, hlo::mul(hlo::sub(hlo::full(b, e, dims, steps - 1), idx), step));
  Value first_half = hlo::compare(idx, hlo::full(b, e, dims, static_cast<double>(steps / 2)), "LT");
  Value r = hlo::select(first_half, up, down);
  if (c10::isIntegralType(out, true)) r = hlo::unary("floor", r);  // PyTorch truncates toward -inf here
  return {r};
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
