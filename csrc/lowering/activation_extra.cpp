// More activations and their backward ops: hardshrink, softshrink, glu (and
// its jvp helpers), rrelu_with_noise, _prelu_kernel, _addmm_activation,
// _trilinear. Formulas follow PyTorch's CPU kernels; bf16/f16 compute in
// float32.
#include <c10/core/WrapDimMinimal.h>

#include <algorithm>

#include "lowering/elementwise_util.h"
#include "lowering/random_util.h"

namespace torch_tpu::lowering {

using namespace ew;

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;

Value cmpc(Value a, double v, const char* dir) { return hlo::compare(a, hlo::full_like(a, v), dir); }
Value one_minus(Value x) { return hlo::sub(hlo::full_like(x, 1), x); }

// |x| <= lambd (the zero band of hardshrink / softshrink), in x's type.
Value in_band(LowerCtx& ctx, Value x) {
  Value l = in(ctx, "lambd", scalar_type(x.element()), x.dims());
  return and_(hlo::compare(x, hlo::neg(l), "GE"), hlo::compare(x, l, "LE"));
}

// The two halves of x along `dim` (glu's split).
std::pair<Value, Value> halves(Value x, int64_t dim) {
  Dims start(x.rank(), 0), mid = x.dims(), limit = x.dims();
  mid[dim] = x.dim(dim) / 2;
  Value a = hlo::slice(x, start, mid);
  start[dim] = mid[dim];
  return {a, hlo::slice(x, start, limit)};
}

int64_t glu_dim(LowerCtx& ctx, std::string_view tensor) {
  int64_t r = ctx.tensor_arg(tensor).dim();
  TORCH_CHECK(r > 0, "glu does not support scalars because halving size must be even");
  return c10::maybe_wrap_dim(ctx.int_arg("dim"), r);
}

}  // namespace

// hardshrink(self, lambd): 0 inside [-lambd, lambd], else self (NaN kept).
TPU_LOWERING(hardshrink) {
  require_floating(ctx, ctx.dtype_of("self"));
  Value x = ctx.tensor("self");
  return {hlo::select(in_band(ctx, x), hlo::full_like(x, 0), x)};
}

TPU_LOWERING(hardshrink_backward) {
  auto dims = out_dims(ctx, {"grad_out", "self"});
  auto t = ctx.result_type({"grad_out", "self"});
  Value g = in(ctx, "grad_out", t, dims), x = in(ctx, "self", ctx.dtype_of("self"), dims);
  return {hlo::select(in_band(ctx, x), hlo::full_like(g, 0), g)};
}

// softshrink(self, lambd): self -+ lambd outside the band, 0 (x * 0, so NaN
// stays NaN) inside.
TPU_LOWERING(softshrink) {
  require_floating(ctx, ctx.dtype_of("self"));
  Value x = ctx.operand("self", opmath(ctx.dtype_of("self")));
  Value l = in(ctx, "lambd", scalar_type(x.element()), x.dims());
  Value r = hlo::mul(x, hlo::full_like(x, 0));
  r = hlo::select(hlo::compare(x, hlo::neg(l), "LT"), hlo::add(x, l), r);
  return {hlo::select(hlo::compare(x, l, "GT"), hlo::sub(x, l), r)};
}

TPU_LOWERING(softshrink_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto t = ctx.result_type({"grad_output", "self"});
  Value g = in(ctx, "grad_output", t, dims), x = in(ctx, "self", opmath(ctx.dtype_of("self")), dims);
  return {hlo::select(in_band(ctx, x), hlo::full_like(g, 0), g)};
}

// glu(self, dim) = a * sigmoid(b) with (a, b) the halves of self along dim.
TPU_LOWERING(glu) {
  int64_t dim = glu_dim(ctx, "self");
  Value x = ctx.operand("self", opmath(ctx.dtype_of("self")));
  TORCH_CHECK(x.dim(dim) % 2 == 0, "Halving dimension must be even, but dimension ", dim, " is size ", x.dim(dim));
  auto [a, b] = halves(x, dim);
  return {hlo::mul(a, hlo::unary("logistic", b))};
}

// d/da = g * s, d/db = g * a * s * (1 - s), s = sigmoid(b).
TPU_LOWERING(glu_backward) {
  int64_t dim = glu_dim(ctx, "self");
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value x = ctx.operand("self", ct), g = ctx.operand("grad_output", ct);
  auto [a, b] = halves(x, dim);
  Value s = hlo::unary("logistic", b);
  Value ga = hlo::mul(s, g);
  Value gb = hlo::mul(hlo::mul(hlo::mul(one_minus(s), s), a), g);
  return {hlo::concatenate({ga, gb}, dim)};
}

// glu_jvp(glu, x, dx, dim) = da * s + glu * (db - s * db).
TPU_LOWERING(glu_jvp) {
  int64_t dim = glu_dim(ctx, "x");
  auto ct = opmath(ctx.result_type({"glu", "x", "dx"}));
  Value glu = ctx.operand("glu", ct), x = ctx.operand("x", ct), dx = ctx.operand("dx", ct);
  Value b = halves(x, dim).second;
  auto [da, db] = halves(dx, dim);
  Value s = hlo::unary("logistic", b);
  return {hlo::add(hlo::mul(da, s), hlo::mul(glu, hlo::sub(db, hlo::mul(s, db))))};
}

// The forward derivative of glu_backward (PyTorch's formula).
TPU_LOWERING(glu_backward_jvp) {
  int64_t dim = glu_dim(ctx, "x");
  auto ct = opmath(ctx.result_type({"grad_x", "grad_glu", "x", "dgrad_glu", "dx"}));
  Value grad_x = ctx.operand("grad_x", ct), x = ctx.operand("x", ct);
  Value dgrad_glu = ctx.operand("dgrad_glu", ct), dx = ctx.operand("dx", ct);
  auto [a, b] = halves(x, dim);
  auto [da, db] = halves(dx, dim);
  Value grad_x_a = halves(grad_x, dim).first;
  Value s = hlo::unary("logistic", b);
  Value glu = hlo::mul(a, s);
  Value db_neg_s = hlo::sub(db, hlo::mul(db, s));
  Value dgrad_x_a = hlo::add(hlo::mul(dgrad_glu, s), hlo::mul(grad_x_a, db_neg_s));
  Value inner = hlo::sub(hlo::sub(da, hlo::mul(da, s)), hlo::mul(glu, db_neg_s));
  Value dgrad_x_b = hlo::add(hlo::mul(dgrad_x_a, hlo::sub(a, glu)), hlo::mul(grad_x_a, inner));
  return {hlo::concatenate({dgrad_x_a, dgrad_x_b}, dim)};
}

// rrelu_with_noise(self, noise!, lower, upper, training, generator) ->
// (output; noise rewritten). Training: x <= 0 gets a slope drawn uniformly
// from [lower, upper), recorded in noise (1 elsewhere). Eval: leaky_relu with
// slope (lower + upper) / 2, noise untouched.
TPU_LOWERING(rrelu_with_noise) {
  auto t = ctx.dtype_of("self");
  auto ct = opmath(t);
  Value x = ctx.operand("self", ct);
  Value lower = in(ctx, "lower", ct, x.dims()), upper = in(ctx, "upper", ct, x.dims());
  if (!ctx.bool_arg("training")) {
    Value slope = hlo::mul(hlo::add(lower, upper), hlo::full_like(x, 0.5));
    return {hlo::select(cmpc(x, 0, "GT"), x, hlo::mul(x, slope)), ctx.tensor("noise")};
  }
  ElementType fe = ct == at::kDouble ? ElementType::kF64 : ElementType::kF32;
  Value u = hlo::convert(uniform01(ctx.rng_key(), x.dims(), fe), element_type(ct));
  Value r = hlo::add(lower, hlo::mul(hlo::sub(upper, lower), u));
  Value neg = cmpc(x, 0, "LE");
  return {hlo::select(neg, hlo::mul(x, r), x), hlo::select(neg, r, hlo::full_like(r, 1))};
}

TPU_LOWERING(rrelu_with_noise_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto ct = opmath(ctx.result_type({"grad_output", "self"}));
  Value g = in(ctx, "grad_output", ct, dims);
  if (ctx.bool_arg("training")) return {hlo::mul(g, in(ctx, "noise", ct, dims))};
  Value x = in(ctx, "self", ct, dims);
  Value slope = hlo::mul(hlo::add(in(ctx, "lower", ct, dims), in(ctx, "upper", ct, dims)), hlo::full_like(x, 0.5));
  return {hlo::select(cmpc(x, 0, "GT"), g, hlo::mul(g, slope))};
}

// _prelu_kernel(self, weight): weight already broadcastable to self.
TPU_LOWERING(_prelu_kernel) {
  auto dims = out_dims(ctx, {"self", "weight"});
  auto ct = opmath(ctx.result_type({"self", "weight"}));
  Value x = in(ctx, "self", ct, dims), w = in(ctx, "weight", ct, dims);
  return {hlo::select(cmpc(x, 0, "GT"), x, hlo::mul(w, x))};
}

// -> (grad_self, grad_weight), both in the broadcast shape (autograd sums
// grad_weight down to weight's shape).
TPU_LOWERING(_prelu_kernel_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self", "weight"});
  auto ct = opmath(ctx.result_type({"grad_output", "self", "weight"}));
  Value g = in(ctx, "grad_output", ct, dims), x = in(ctx, "self", ct, dims), w = in(ctx, "weight", ct, dims);
  Value pos = cmpc(x, 0, "GT");
  return {hlo::select(pos, g, hlo::mul(w, g)), hlo::select(pos, hlo::full_like(g, 0), hlo::mul(x, g))};
}

// _addmm_activation(self, mat1, mat2, beta, alpha, use_gelu): addmm, then
// relu or (erf) gelu.
TPU_LOWERING(_addmm_activation) {
  auto out = ctx.out_dtype().value_or(ctx.result_type({"self", "mat1", "mat2"}));
  TORCH_CHECK_NOT_IMPLEMENTED(out != at::kBool, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
  TORCH_CHECK(ctx.dtype_of("mat1") == ctx.dtype_of("mat2") && ctx.dtype_of("self") == ctx.dtype_of("mat1"),
              "expected m1, m2 and self to have the same dtype, but got: ", ctx.dtype_of("self"), ", ",
              ctx.dtype_of("mat1"), " and ", ctx.dtype_of("mat2"));
  auto ct = opmath(out);
  ElementType ce = element_type(ct);
  Value m1 = ctx.operand("mat1", ct), m2 = ctx.operand("mat2", ct);
  std::string precision = hlo::is_float(ce) ? "HIGHEST" : "DEFAULT";
  Value prod = hlo::dot_general(m1, m2, {{}, {}, {1}, {0}}, ce, precision);
  Dims dims = prod.dims();
  prod = hlo::mul(prod, in(ctx, "alpha", ct, dims));
  Value beta = in(ctx, "beta", ct, dims);
  Value self = hlo::mul(in(ctx, "self", ct, dims), beta);
  self = hlo::select(cmpc(beta, 0, "EQ"), hlo::full_like(self, 0), self);
  Value y = hlo::add(self, prod);
  if (ct != out) y = hlo::convert(hlo::convert(y, element_type(out)), ce);  // addmm rounds first
  if (ctx.bool_arg("use_gelu")) {
    Value cdf = hlo::add(hlo::full_like(y, 1), ew::erf(hlo::mul(y, hlo::full_like(y, kSqrt1_2))));
    return {hlo::mul(hlo::mul(y, hlo::full_like(y, 0.5)), cdf)};
  }
  return {nan_max(y, hlo::full_like(y, 0))};
}

// _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim):
// each input gets size-1 dims at its expand positions, the three broadcast
// products are summed over sumdim (those dims are dropped).
TPU_LOWERING(_trilinear) {
  auto out = ctx.out_dtype().value_or(ctx.result_type({"i1", "i2", "i3"}));
  auto ct = opmath(out);
  const char* names[3] = {"i1", "i2", "i3"};
  const char* expands[3] = {"expand1", "expand2", "expand3"};
  std::vector<Value> xs;
  int64_t rank = -1;
  for (int k = 0; k < 3; ++k) {
    Value v = ctx.operand(names[k], ct);
    auto ex = ctx.ints_arg(expands[k]);
    int64_t r = v.rank() + static_cast<int64_t>(ex.size());
    TORCH_CHECK(rank < 0 || rank == r, "_trilinear: inputs have different ranks after expansion");
    rank = r;
    Dims shape;
    int64_t src = 0;
    for (int64_t i = 0; i < r; ++i) {
      bool expanded = std::find(ex.begin(), ex.end(), i) != ex.end();
      shape.push_back(expanded ? 1 : v.dim(src++));
    }
    xs.push_back(hlo::reshape(v, shape));
  }
  Dims full(rank, 1);
  for (auto& v : xs)
    for (int64_t i = 0; i < rank; ++i)
      if (v.dim(i) != 1) full[i] = v.dim(i);
  Value p = hlo::mul(hlo::mul(hlo::broadcast_to(xs[0], full), hlo::broadcast_to(xs[1], full)),
                     hlo::broadcast_to(xs[2], full));
  Dims sd;
  for (auto d : ctx.ints_arg("sumdim")) sd.push_back(c10::maybe_wrap_dim(d, rank));
  return {hlo::reduce(p, sd, hlo::ReduceKind::kSum)};
}

}  // namespace torch_tpu::lowering
