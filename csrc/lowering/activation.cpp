// Activation functions and their backward ops (formulas follow PyTorch's
// CPU kernels). Computation runs in float32 for bf16/f16 inputs.
#include <string>

#include "lowering/elementwise_util.h"

namespace torch_tpu::lowering {

using namespace ew;

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;   // 1/sqrt(2)
constexpr double k2_SqrtPi = 1.12837916709551257390;  // 2/sqrt(pi)

at::ScalarType compute_type(LowerCtx& ctx, std::string_view name = "self") {
  require_floating(ctx, ctx.dtype_of(name), /*complex_ok=*/true);  // as before: complex rules decide themselves
  return opmath(ctx.dtype_of(name));
}

Value un(const char* op, Value x) { return hlo::unary(op, x); }
Value cmp(Value a, double v, const char* dir) { return hlo::compare(a, hlo::full_like(a, v), dir); }
Value mulc(Value a, double v) { return hlo::mul(a, hlo::full_like(a, v)); }

Value sigmoid(Value x) { return un("logistic", x); }

}  // namespace

TPU_LOWERING(relu) {
  Value x = ctx.tensor("self");
  return {nan_max(x, hlo::full_like(x, 0))};
}

// threshold(self, threshold, value): x <= threshold ? value : x, compared
// in self's dtype like PyTorch.
TPU_LOWERING(threshold) {
  Value x = ctx.tensor("self");
  auto t = ctx.dtype_of("self");
  Value th = in(ctx, "threshold", t, x.dims()), v = in(ctx, "value", t, x.dims());
  return {hlo::select(hlo::compare(x, th, "LE"), v, x)};
}

TPU_LOWERING(threshold_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto t = ctx.result_type({"grad_output", "self"});
  Value g = in(ctx, "grad_output", t, dims), x = in(ctx, "self", ctx.dtype_of("self"), dims);
  Value th = in(ctx, "threshold", ctx.dtype_of("self"), dims);
  return {hlo::select(hlo::compare(x, th, "LE"), hlo::full_like(g, 0), g)};
}

TPU_LOWERING(gelu) {
  std::string approx = ctx.has("approximate") ? ctx.str_arg("approximate") : "none";
  Value x = ctx.operand("self", compute_type(ctx));
  if (approx == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    Value inner = mulc(hlo::add(x, mulc(hlo::mul(hlo::mul(x, x), x), 0.044715)), kSqrt1_2 * k2_SqrtPi);
    return {hlo::mul(mulc(x, 0.5), hlo::add(hlo::full_like(x, 1), un("tanh", inner)))};
  }
  TORCH_CHECK(approx == "none", ctx.op_name(), ": approximate must be 'none' or 'tanh', got '", approx, "'");
  Value cdf = hlo::add(hlo::full_like(x, 1), ew::erf(mulc(x, kSqrt1_2)));
  return {hlo::mul(mulc(x, 0.5), cdf)};
}

TPU_LOWERING(gelu_backward) {
  std::string approx = ctx.has("approximate") ? ctx.str_arg("approximate") : "none";
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  if (approx == "tanh") {
    const double kBeta = 1.41421356237309504880 * k2_SqrtPi * 0.5, kKappa = 0.044715;
    Value x2 = hlo::mul(x, x);
    Value inner = mulc(hlo::add(x, mulc(hlo::mul(x2, x), kKappa)), kBeta);
    Value th = un("tanh", inner);
    Value left = mulc(x, 0.5);
    Value right = hlo::add(hlo::full_like(x, 1), th);
    Value left_d = mulc(right, 0.5);
    Value tanh_d = hlo::sub(hlo::full_like(x, 1), hlo::mul(th, th));
    Value inner_d = mulc(hlo::add(hlo::full_like(x, 1), mulc(x2, 3 * kKappa)), kBeta);
    Value right_d = hlo::mul(hlo::mul(left, tanh_d), inner_d);
    return {hlo::mul(g, hlo::add(left_d, right_d))};
  }
  TORCH_CHECK(approx == "none", ctx.op_name(), ": approximate must be 'none' or 'tanh', got '", approx, "'");
  Value cdf = mulc(hlo::add(hlo::full_like(x, 1), ew::erf(mulc(x, kSqrt1_2))), 0.5);
  Value pdf = mulc(un("exponential", mulc(hlo::mul(x, x), -0.5)), k2_SqrtPi * kSqrt1_2 * 0.5);
  return {hlo::mul(g, hlo::add(cdf, hlo::mul(x, pdf)))};
}

TPU_LOWERING(silu) {
  Value x = ctx.operand("self", compute_type(ctx));
  return {hlo::mul(x, sigmoid(x))};
}

TPU_LOWERING(silu_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  Value s = sigmoid(x);
  Value d = hlo::mul(s, hlo::add(hlo::full_like(x, 1), hlo::mul(x, hlo::sub(hlo::full_like(s, 1), s))));
  return {hlo::mul(g, d)};  // no conj: CPU's kernel has none (silu has no complex autograd)
}

TPU_LOWERING(sigmoid_backward) {
  auto dims = out_dims(ctx, {"grad_output", "output"});
  auto ct = opmath(ctx.result_type({"grad_output", "output"}));
  Value g = in(ctx, "grad_output", ct, dims), y = in(ctx, "output", ct, dims);
  // Complex: the gradient is grad * conj(dy/dx), as CPU's kernel computes
  // (conj is the identity on real values).
  return {hlo::mul(g, hlo::conj(hlo::mul(hlo::sub(hlo::full_like(y, 1), y), y)))};
}

TPU_LOWERING(tanh_backward) {
  auto dims = out_dims(ctx, {"grad_output", "output"});
  auto ct = opmath(ctx.result_type({"grad_output", "output"}));
  Value g = in(ctx, "grad_output", ct, dims), y = in(ctx, "output", ct, dims);
  return {hlo::mul(g, hlo::conj(hlo::sub(hlo::full_like(y, 1), hlo::mul(y, y))))};  // conj: as sigmoid_backward
}

TPU_LOWERING(leaky_relu) {
  Value x = ctx.operand("self", compute_type(ctx));
  Value slope = in(ctx, "negative_slope", scalar_type(x.element()), x.dims());
  return {hlo::select(cmp(x, 0, "GT"), x, hlo::mul(x, slope))};
}

TPU_LOWERING(leaky_relu_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  Value slope = in(ctx, "negative_slope", ct, dims);
  return {hlo::select(cmp(x, 0, "GT"), g, hlo::mul(g, slope))};
}

// elu(self, alpha, scale, input_scale); selu and celu decompose into it.
TPU_LOWERING(elu) {
  Value x = ctx.operand("self", compute_type(ctx));
  auto ct = scalar_type(x.element());
  Value alpha = in(ctx, "alpha", ct, x.dims()), scale = in(ctx, "scale", ct, x.dims());
  Value input_scale = in(ctx, "input_scale", ct, x.dims());
  Value neg = hlo::mul(un("exponential_minus_one", hlo::mul(x, input_scale)), hlo::mul(alpha, scale));
  return {hlo::select(cmp(x, 0, "LE"), neg, hlo::mul(x, scale))};
}

TPU_LOWERING(elu_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self_or_result"});
  auto ct = opmath(ctx.result_type({"grad_output", "self_or_result"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self_or_result", ct, dims);
  Value negcoef = hlo::mul(in(ctx, "alpha", ct, dims), in(ctx, "scale", ct, dims));
  Value poscoef = in(ctx, "scale", ct, dims), negiptcoef = in(ctx, "input_scale", ct, dims);
  Value neg = ctx.bool_arg("is_result")
                  ? hlo::mul(hlo::mul(g, negiptcoef), hlo::add(x, negcoef))
                  : hlo::mul(hlo::mul(hlo::mul(g, negiptcoef), negcoef), un("exponential", hlo::mul(x, negiptcoef)));
  return {hlo::select(cmp(x, 0, "LE"), neg, hlo::mul(g, poscoef))};
}

TPU_LOWERING(hardtanh) {
  auto dims = out_dims(ctx, {"self"});
  auto t = ctx.dtype_of("self");
  Value x = in(ctx, "self", t, dims);
  return {nan_min(nan_max(x, in(ctx, "min_val", t, dims)), in(ctx, "max_val", t, dims))};
}

TPU_LOWERING(hardtanh_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto t = ctx.result_type({"grad_output", "self"});
  Value g = in(ctx, "grad_output", t, dims), x = in(ctx, "self", t, dims);
  Value lo = in(ctx, "min_val", t, dims), hi = in(ctx, "max_val", t, dims);
  Value outside = or_(hlo::compare(x, lo, "LE"), hlo::compare(x, hi, "GE"));
  return {hlo::select(outside, hlo::full_like(g, 0), g)};
}

TPU_LOWERING(softplus) {
  Value x = ctx.operand("self", compute_type(ctx));
  auto ct = scalar_type(x.element());
  Value beta = in(ctx, "beta", ct, x.dims()), th = in(ctx, "threshold", ct, x.dims());
  Value xb = hlo::mul(x, beta);
  Value soft = hlo::div(un("log_plus_one", un("exponential", xb)), beta);
  return {hlo::select(hlo::compare(xb, th, "GT"), x, soft)};
}

TPU_LOWERING(softplus_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  Value beta = in(ctx, "beta", ct, dims), th = in(ctx, "threshold", ct, dims);
  Value xb = hlo::mul(x, beta);
  Value z = un("exponential", xb);
  return {hlo::select(hlo::compare(xb, th, "GT"), g, hlo::div(hlo::mul(g, z), hlo::add(z, hlo::full_like(z, 1))))};
}

TPU_LOWERING(hardsigmoid) {
  Value x = ctx.operand("self", compute_type(ctx));
  Value r = hlo::min(hlo::max(hlo::add(x, hlo::full_like(x, 3)), hlo::full_like(x, 0)), hlo::full_like(x, 6));
  r = hlo::select(is_nan(x), x, r);
  return {hlo::div(r, hlo::full_like(r, 6))};
}

TPU_LOWERING(hardsigmoid_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  Value inside = and_(cmp(x, -3, "GT"), cmp(x, 3, "LT"));
  return {hlo::select(inside, hlo::div(g, hlo::full_like(g, 6)), hlo::full_like(g, 0))};
}

TPU_LOWERING(hardswish) {
  Value x = ctx.operand("self", compute_type(ctx));
  Value r = hlo::min(hlo::max(hlo::add(x, hlo::full_like(x, 3)), hlo::full_like(x, 0)), hlo::full_like(x, 6));
  r = hlo::select(is_nan(x), x, r);
  return {hlo::div(hlo::mul(x, r), hlo::full_like(r, 6))};
}

TPU_LOWERING(hardswish_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  Value mid = hlo::mul(g, hlo::add(hlo::div(x, hlo::full_like(x, 3)), hlo::full_like(x, 0.5)));
  return {hlo::select(cmp(x, -3, "LE"), hlo::full_like(g, 0), hlo::select(cmp(x, 3, "LT"), mid, g))};
}

TPU_LOWERING(mish) {
  Value x = ctx.operand("self", compute_type(ctx));
  return {hlo::mul(x, un("tanh", un("log_plus_one", un("exponential", x))))};
}

TPU_LOWERING(mish_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  Value s = sigmoid(x);
  Value tsp = un("tanh", un("log_plus_one", un("exponential", x)));
  Value d = hlo::add(tsp, hlo::mul(hlo::mul(x, s), hlo::sub(hlo::full_like(tsp, 1), hlo::mul(tsp, tsp))));
  return {hlo::mul(g, d)};
}

// log_sigmoid_forward(self) -> (output, buffer): output = min(x, 0) -
// log1p(exp(-|x|)); buffer = exp(-|x|) as on CPU.
TPU_LOWERING(log_sigmoid_forward) {
  Value x = ctx.operand("self", compute_type(ctx));
  Value z = un("exponential", hlo::neg(un("abs", x)));
  Value out = hlo::sub(hlo::min(x, hlo::full_like(x, 0)), un("log_plus_one", z));
  out = hlo::select(is_nan(x), x, out);
  Value buffer = z;
  if (auto s = ctx.out_sizes(1); s && *s != z.dims()) buffer = hlo::full(ctx.b(), z.element(), *s, 0);
  return {out, buffer};
}

// Recomputes exp(-|x|) instead of trusting the buffer.
TPU_LOWERING(log_sigmoid_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims);
  Value z = un("exponential", hlo::neg(un("abs", x)));
  Value neg = cmp(x, 0, "LT");
  Value max_deriv = hlo::select(neg, hlo::full_like(x, 1), hlo::full_like(x, 0));
  Value sign = hlo::select(neg, hlo::full_like(x, 1), hlo::full_like(x, -1));
  Value d = hlo::sub(max_deriv, hlo::mul(sign, hlo::div(z, hlo::add(hlo::full_like(z, 1), z))));
  return {hlo::mul(g, d)};
}

}  // namespace torch_tpu::lowering
