// Normalization ops: batch norm (every ATen entry point, + backward and the
// sync-batch-norm pieces), group norm (+ backward), weight norm (+ backward).
// Half-precision inputs are computed in f32 and rounded at the end, like
// CPU's accumulate types. Running statistics are updated like CPU: the
// engine writes back mutated `Tensor(a!)` arguments; functional variants
// return them.
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <cmath>

#include "lowering/compute_util.h"
#include "lowering/norm_params.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

int64_t prod(const Dims& d) {
  int64_t n = 1;
  for (auto v : d) n *= v;
  return n;
}

// A value for output i: `v`, or zeros when the meta kernel says that output
// is empty (eval-mode save_mean / save_invstd, reserve).
Value stat_out(LowerCtx& ctx, int i, Value v) {
  auto sizes = ctx.out_sizes(i);
  if (sizes && prod(*sizes) == 0) return hlo::full(ctx.b(), v.element(), *sizes, 0);
  return v;
}

// Per-channel vector [C] broadcast along dim 1 of `dims`.
Value per_channel(Value v, const Dims& dims) { return hlo::broadcast_in_dim(v, dims, {1}); }

Value opt_channel(LowerCtx& ctx, const char* name, ElementType ce, int64_t c) {
  if (!ctx.is_tensor(name)) return Value();
  return hlo::reshape(hlo::convert(ctx.tensor(name), ce), {c});
}

struct BnResult {
  Value out, mean, invstd, new_rm, new_rv;
};

// Batch norm forward. `use_batch_stats`: normalize with the batch's
// statistics (training, or no running stats); `update`: also fold them into
// the running stats.
BnResult bn_forward(LowerCtx& ctx, bool use_batch_stats, bool update, double momentum, double eps) {
  Value in = ctx.tensor("input");
  TORCH_CHECK(in.rank() >= 2, ctx.op_name(), ": expected an input with at least 2 dims, got ", in.rank());
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Dims xd = x.dims();
  int64_t c = xd[1];
  Dims red = all_but(x.rank(), {1});
  int64_t n = c == 0 ? 0 : prod(xd) / c;
  Builder& b = ctx.b();
  bool has_running = ctx.is_tensor("running_mean") && ctx.is_tensor("running_var");
  BnResult r;
  Value mean, invstd;
  if (use_batch_stats) {
    Value inv_n = hlo::full(b, ce, {c}, 1.0 / static_cast<double>(n));
    mean = hlo::mul(hlo::reduce(x, red, hlo::ReduceKind::kSum), inv_n);
    Value xc = hlo::sub(x, per_channel(mean, xd));
    Value var = hlo::mul(hlo::reduce(hlo::mul(xc, xc), red, hlo::ReduceKind::kSum), inv_n);
    invstd = hlo::div(hlo::full(b, ce, {c}, 1.0), hlo::unary("sqrt", hlo::add(var, hlo::full(b, ce, {c}, eps))));
    if (update && has_running) {
      Value rm = ctx.tensor("running_mean");
      Value rv = ctx.tensor("running_var");
      ElementType re = acc_type(rm.element());
      Value m = hlo::full(b, re, {c}, momentum), m1 = hlo::full(b, re, {c}, 1.0 - momentum);
      double unbias = n > 1 ? static_cast<double>(n) / static_cast<double>(n - 1) : INFINITY;
      Value var_u = hlo::mul(hlo::convert(var, re), hlo::full(b, re, {c}, unbias));
      r.new_rm = hlo::add(hlo::mul(m, hlo::convert(mean, re)), hlo::mul(m1, hlo::convert(hlo::reshape(rm, {c}), re)));
      r.new_rv = hlo::add(hlo::mul(m, var_u), hlo::mul(m1, hlo::convert(hlo::reshape(rv, {c}), re)));
    }
  } else {
    TORCH_CHECK(has_running, ctx.op_name(), ": running_mean and running_var must be defined in evaluation mode");
    mean = hlo::reshape(hlo::convert(ctx.tensor("running_mean"), ce), {c});
    Value rv = hlo::reshape(hlo::convert(ctx.tensor("running_var"), ce), {c});
    invstd = hlo::div(hlo::full(b, ce, {c}, 1.0), hlo::unary("sqrt", hlo::add(rv, hlo::full(b, ce, {c}, eps))));
  }
  if (has_running && !r.new_rm.valid()) {
    r.new_rm = ctx.tensor("running_mean");
    r.new_rv = ctx.tensor("running_var");
  }
  // y = x * alpha + beta with alpha = invstd * w, beta = b - mean * alpha,
  // the order CPU's kernel rounds in.
  Value alpha = invstd;
  Value w = opt_channel(ctx, "weight", ce, c);
  if (w.valid()) alpha = hlo::mul(alpha, w);
  Value beta = hlo::neg(hlo::mul(mean, alpha));
  Value bias = opt_channel(ctx, "bias", ce, c);
  if (bias.valid()) beta = hlo::sub(bias, hlo::mul(mean, alpha));
  r.out = hlo::add(hlo::mul(x, per_channel(alpha, xd)), per_channel(beta, xd));
  r.mean = mean;
  r.invstd = invstd;
  return r;
}

// Batch norm backward from (mean, invstd); `train`: the statistics were the
// batch's own (their gradient flows into grad_input).
std::vector<Value> bn_backward(LowerCtx& ctx, Value g0, Value in, Value mean, Value invstd, Value w, bool train,
                               const std::vector<bool>& mask) {
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Value g = hlo::convert(g0, ce);
  Dims xd = x.dims();
  int64_t c = xd[1];
  Dims red = all_but(x.rank(), {1});
  int64_t n = c == 0 ? 0 : prod(xd) / c;
  Builder& b = ctx.b();
  Value xhat = hlo::mul(hlo::sub(x, per_channel(mean, xd)), per_channel(invstd, xd));
  Value sum_g = hlo::reduce(g, red, hlo::ReduceKind::kSum);
  Value sum_gx = hlo::reduce(hlo::mul(g, xhat), red, hlo::ReduceKind::kSum);
  std::vector<Value> out(3);
  Value scale = w.valid() ? hlo::mul(invstd, w) : invstd;
  if (mask[0]) {
    if (train) {
      Value inv_n = hlo::full(b, ce, {c}, 1.0 / static_cast<double>(n));
      Value mg = hlo::mul(sum_g, inv_n), mgx = hlo::mul(sum_gx, inv_n);
      Value gi = hlo::sub(hlo::sub(g, per_channel(mg, xd)), hlo::mul(xhat, per_channel(mgx, xd)));
      out[0] = hlo::mul(gi, per_channel(scale, xd));
    } else {
      out[0] = hlo::mul(g, per_channel(scale, xd));
    }
  } else {
    out[0] = hlo::constant(b, ce, 0);
  }
  out[1] = mask[1] ? sum_gx : hlo::constant(b, ce, 0);
  out[2] = mask[2] ? sum_g : hlo::constant(b, ce, 0);
  return out;
}

Value rsqrt_eps(Builder& b, Value var, double eps) {
  return hlo::div(hlo::full_like(var, 1.0), hlo::unary("sqrt", hlo::add(var, hlo::full_like(var, eps))));
}

}  // namespace

// ---- batch norm forward ----------------------------------------------------------

// native_batch_norm / _native_batch_norm_legit (+ .no_stats): (out,
// save_mean, save_invstd) plus, for the legit form, the running stats
// written back.
TPU_LOWERING(native_batch_norm) {
  bool training = ctx.bool_arg("training");
  bool has_running = ctx.is_tensor("running_mean");
  BnResult r = bn_forward(ctx, training || !has_running, training, ctx.float_arg("momentum"), ctx.float_arg("eps"));
  std::vector<Value> out{r.out, stat_out(ctx, 1, r.mean), stat_out(ctx, 2, r.invstd)};
  return out;
}

TPU_LOWERING(_native_batch_norm_legit) {
  bool training = ctx.bool_arg("training");
  bool has_running = ctx.is_tensor("running_mean");
  BnResult r = bn_forward(ctx, training || !has_running, training, ctx.float_arg("momentum"), ctx.float_arg("eps"));
  std::vector<Value> out{r.out, stat_out(ctx, 1, r.mean), stat_out(ctx, 2, r.invstd)};
  if (!training && has_running) {
    // Eval mode: nothing is computed from the batch, and CPU's save_mean
    // and save_invstd are empty. Said here, not only by the meta fix-up:
    // the out= overload has no meta kernel.
    out[1] = hlo::full(ctx.b(), r.mean.element(), {0}, 0);
    out[2] = hlo::full(ctx.b(), r.invstd.element(), {0}, 0);
  }
  if (has_running) {
    out.push_back(r.new_rm);
    out.push_back(r.new_rv);
  }
  return out;
}

TPU_LOWERING(_native_batch_norm_legit_no_training) {
  BnResult r = bn_forward(ctx, false, false, ctx.float_arg("momentum"), ctx.float_arg("eps"));
  return {r.out, stat_out(ctx, 1, r.mean), stat_out(ctx, 2, r.invstd)};
}

TPU_LOWERING(_native_batch_norm_legit_functional) {
  bool training = ctx.bool_arg("training");
  BnResult r = bn_forward(ctx, training, training, ctx.float_arg("momentum"), ctx.float_arg("eps"));
  return {r.out, stat_out(ctx, 1, r.mean), stat_out(ctx, 2, r.invstd), r.new_rm, r.new_rv};
}

// (out, save_mean, save_rstd, reserve) + running stats (written back, or
// returned by the functional form).
TPU_LOWERING(_batch_norm_with_update) {
  BnResult r = bn_forward(ctx, true, true, ctx.float_arg("momentum"), ctx.float_arg("eps"));
  Value reserve = hlo::full(ctx.b(), ElementType::kU8, ctx.out_sizes(3).value_or(Dims{0}), 0);
  return {r.out, r.mean, r.invstd, reserve, r.new_rm, r.new_rv};
}
TPU_LOWERING_ALIAS(_batch_norm_with_update_functional, _batch_norm_with_update);

TPU_LOWERING(_batch_norm_no_update) {
  bool has_running = ctx.is_tensor("running_mean");
  BnResult r = bn_forward(ctx, !has_running, false, ctx.float_arg("momentum"), ctx.float_arg("eps"));
  Value reserve = hlo::full(ctx.b(), ElementType::kU8, ctx.out_sizes(3).value_or(Dims{0}), 0);
  return {r.out, stat_out(ctx, 1, r.mean), stat_out(ctx, 2, r.invstd), reserve};
}

// ---- batch norm backward ----------------------------------------------------------

namespace {

std::vector<Value> bn_backward_entry(LowerCtx& ctx, bool train, const char* save_var_name) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  int64_t c = in.dim(1);
  Value mean, invstd;
  if (train) {
    mean = hlo::reshape(hlo::convert(ctx.tensor("save_mean"), ce), {c});
    invstd = hlo::reshape(hlo::convert(ctx.tensor(save_var_name), ce), {c});
  } else {
    mean = hlo::reshape(hlo::convert(ctx.tensor("running_mean"), ce), {c});
    Value rv = hlo::reshape(hlo::convert(ctx.tensor("running_var"), ce), {c});
    invstd = rsqrt_eps(ctx.b(), rv, ctx.float_arg("eps"));
  }
  Value w = opt_channel(ctx, "weight", ce, c);
  auto m = ctx.arg("output_mask").toBoolList();
  std::vector<bool> mask{m[0], m[1], m[2]};
  return bn_backward(ctx, ctx.tensor("grad_out"), in, mean, invstd, w, train, mask);
}

}  // namespace

TPU_LOWERING(native_batch_norm_backward) {
  // Eval mode without running stats normalized with the batch's own.
  bool train = ctx.bool_arg("train") || !ctx.is_tensor("running_mean");
  return bn_backward_entry(ctx, train, "save_invstd");
}

TPU_LOWERING(batch_norm_backward) {
  bool train = ctx.bool_arg("update") || !ctx.is_tensor("running_mean");
  return bn_backward_entry(ctx, train, "save_var");
}

// ---- sync batch norm pieces -----------------------------------------------------------

// (mean, invstd) over all dims but 1.
TPU_LOWERING(batch_norm_stats) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Dims xd = x.dims();
  int64_t c = xd[1];
  Dims red = all_but(x.rank(), {1});
  int64_t n = c == 0 ? 0 : prod(xd) / c;
  Value inv_n = hlo::full(ctx.b(), ce, {c}, 1.0 / static_cast<double>(n));
  Value mean = hlo::mul(hlo::reduce(x, red, hlo::ReduceKind::kSum), inv_n);
  Value xc = hlo::sub(x, per_channel(mean, xd));
  Value var = hlo::mul(hlo::reduce(hlo::mul(xc, xc), red, hlo::ReduceKind::kSum), inv_n);
  return {mean, rsqrt_eps(ctx.b(), var, ctx.float_arg("eps"))};
}

TPU_LOWERING(batch_norm_elemt) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Dims xd = x.dims();
  int64_t c = xd[1];
  Value mean = hlo::reshape(hlo::convert(ctx.tensor("mean"), ce), {c});
  Value scale = hlo::reshape(hlo::convert(ctx.tensor("invstd"), ce), {c});
  Value w = opt_channel(ctx, "weight", ce, c);
  if (w.valid()) scale = hlo::mul(scale, w);
  Value y = hlo::mul(hlo::sub(x, per_channel(mean, xd)), per_channel(scale, xd));
  Value bias = opt_channel(ctx, "bias", ce, c);
  if (bias.valid()) y = hlo::add(y, per_channel(bias, xd));
  return {y};
}

// Combine per-replica (mean, invstd) [R, C] with counts [R] into the global
// (mean, invstd), updating the running stats (returned as extra values:
// the engine writes them back when the schema marks them mutable; these
// schemas do not, see the CPU note below).
TPU_LOWERING(batch_norm_gather_stats) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(element_type(ctx.dtype_of("mean")));
  Value mean = hlo::convert(ctx.tensor("mean"), ce);
  Value invstd = hlo::convert(ctx.tensor("invstd"), ce);
  int64_t r = mean.dim(0), c = mean.dim(1);
  Builder& b = ctx.b();
  Value counts;
  if (ctx.has("counts")) {
    counts = hlo::reshape(hlo::convert(ctx.tensor("counts"), ce), {r});
  } else {
    counts = hlo::full(b, ce, {r}, static_cast<double>(ctx.int_arg("count")));
  }
  double eps = ctx.float_arg("eps");
  Value cnt = hlo::broadcast_in_dim(counts, {r, c}, {0});
  Value total = hlo::reduce(counts, {0}, hlo::ReduceKind::kSum);
  Value total_c = hlo::broadcast_in_dim(total, {c}, {});
  Value gmean = hlo::div(hlo::reduce(hlo::mul(mean, cnt), {0}, hlo::ReduceKind::kSum), total_c);
  // var_r = 1/invstd^2 - eps; sum of n_r * (var_r + (mean_r - gmean)^2).
  Value var_r = hlo::sub(hlo::div(hlo::full_like(invstd, 1.0), hlo::mul(invstd, invstd)), hlo::full_like(invstd, eps));
  Value dm = hlo::sub(mean, hlo::broadcast_in_dim(gmean, {r, c}, {1}));
  Value m2 = hlo::reduce(hlo::mul(cnt, hlo::add(var_r, hlo::mul(dm, dm))), {0}, hlo::ReduceKind::kSum);
  Value gvar = hlo::div(m2, total_c);
  (void)in;
  return {gmean, rsqrt_eps(b, gvar, eps)};
}
TPU_LOWERING_ALIAS(batch_norm_gather_stats_with_counts, batch_norm_gather_stats);

// (sum_dy, sum_dy_xmu, grad_weight, grad_bias)
TPU_LOWERING(batch_norm_backward_reduce) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Value g = hlo::convert(ctx.tensor("grad_out"), ce);
  Dims xd = x.dims();
  int64_t c = xd[1];
  Dims red = all_but(x.rank(), {1});
  Value mean = hlo::reshape(hlo::convert(ctx.tensor("mean"), ce), {c});
  Value invstd = hlo::reshape(hlo::convert(ctx.tensor("invstd"), ce), {c});
  Value sum_dy = hlo::reduce(g, red, hlo::ReduceKind::kSum);
  Value sum_dy_xmu = hlo::reduce(hlo::mul(g, hlo::sub(x, per_channel(mean, xd))), red, hlo::ReduceKind::kSum);
  Value gw = hlo::mul(sum_dy_xmu, invstd);
  Builder& b = ctx.b();
  // (no meta kernel: the flags say which outputs are wanted)
  auto pick = [&](const char* flag, Value v) { return ctx.bool_arg(flag) ? v : hlo::constant(b, ce, 0); };
  return {pick("input_g", sum_dy), pick("input_g", sum_dy_xmu), pick("weight_g", gw), pick("bias_g", sum_dy)};
}

TPU_LOWERING(batch_norm_backward_elemt) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Value g = hlo::convert(ctx.tensor("grad_out"), ce);
  Dims xd = x.dims();
  int64_t c = xd[1];
  Value mean = hlo::reshape(hlo::convert(ctx.tensor("mean"), ce), {c});
  Value invstd = hlo::reshape(hlo::convert(ctx.tensor("invstd"), ce), {c});
  Value total = hlo::convert(hlo::reduce(ctx.tensor("count"), {0}, hlo::ReduceKind::kSum), ce);
  Value tc = hlo::broadcast_in_dim(total, {c}, {});
  Value mdy = hlo::div(hlo::reshape(hlo::convert(ctx.tensor("sum_dy"), ce), {c}), tc);
  Value mdyx = hlo::div(hlo::reshape(hlo::convert(ctx.tensor("sum_dy_xmu"), ce), {c}), tc);
  Value scale = invstd;
  Value w = opt_channel(ctx, "weight", ce, c);
  if (w.valid()) scale = hlo::mul(scale, w);
  Value k = hlo::mul(mdyx, hlo::mul(invstd, invstd));
  Value xc = hlo::sub(x, per_channel(mean, xd));
  Value gi = hlo::sub(hlo::sub(g, per_channel(mdy, xd)), hlo::mul(xc, per_channel(k, xd)));
  return {hlo::mul(gi, per_channel(scale, xd))};
}

// (mean, unbiased var) of the batch, after which CPU also updates the running
// stats; this schema does not mark them mutable.
TPU_LOWERING(batch_norm_update_stats) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Dims xd = x.dims();
  int64_t c = xd[1];
  Dims red = all_but(x.rank(), {1});
  int64_t n = c == 0 ? 0 : prod(xd) / c;
  Builder& b = ctx.b();
  Value mean = hlo::mul(hlo::reduce(x, red, hlo::ReduceKind::kSum), hlo::full(b, ce, {c}, 1.0 / n));
  Value xc = hlo::sub(x, per_channel(mean, xd));
  Value var = hlo::mul(hlo::reduce(hlo::mul(xc, xc), red, hlo::ReduceKind::kSum),
                       hlo::full(b, ce, {c}, 1.0 / static_cast<double>(n - 1)));
  return {mean, var};
}

// ---- group norm ----------------------------------------------------------------------------

void check_norm_params(const LowerCtx& ctx, const char* op, std::initializer_list<const char*> params) {
  const at::ScalarType in = ctx.dtype_of("input");
  const bool reduced = in == at::ScalarType::BFloat16 || in == at::ScalarType::Half;
  for (const char* p : params) {
    if (!ctx.is_tensor(p)) continue;
    const at::ScalarType t = ctx.dtype_of(p);
    TORCH_CHECK(t == in || (reduced && t == at::ScalarType::Float), op, ": expected ", p,
                " to have the input's dtype ", in, reduced ? " (or Float)" : "", ", but got ", t);
  }
}

TPU_LOWERING(native_group_norm) {
  check_norm_params(ctx, "native_group_norm", {"weight", "bias"});
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Dims xd = x.dims();
  int64_t n = ctx.int_arg("N"), c = ctx.int_arg("C"), hw = ctx.int_arg("HxW"), g = ctx.int_arg("group");
  int64_t d = g == 0 ? 0 : c / g * hw;
  Builder& b = ctx.b();
  Value xg = hlo::reshape(x, {n, g, d});
  Value inv_d = hlo::full(b, ce, {n, g}, 1.0 / static_cast<double>(d));
  Value mean = hlo::mul(hlo::reduce(xg, {2}, hlo::ReduceKind::kSum), inv_d);
  Value xc = hlo::sub(xg, hlo::broadcast_in_dim(mean, {n, g, d}, {0, 1}));
  Value var = hlo::mul(hlo::reduce(hlo::mul(xc, xc), {2}, hlo::ReduceKind::kSum), inv_d);
  Value rstd = rsqrt_eps(b, var, ctx.float_arg("eps"));
  Value y = hlo::reshape(hlo::mul(xc, hlo::broadcast_in_dim(rstd, {n, g, d}, {0, 1})), {n, c, hw});
  Value w = opt_channel(ctx, "weight", ce, c);
  if (w.valid()) y = hlo::mul(y, hlo::broadcast_in_dim(w, {n, c, hw}, {1}));
  Value bias = opt_channel(ctx, "bias", ce, c);
  if (bias.valid()) y = hlo::add(y, hlo::broadcast_in_dim(bias, {n, c, hw}, {1}));
  return {hlo::reshape(y, xd), mean, rstd};
}

TPU_LOWERING(native_group_norm_backward) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  int64_t n = ctx.int_arg("N"), c = ctx.int_arg("C"), hw = ctx.int_arg("HxW"), g = ctx.int_arg("group");
  int64_t cg = g == 0 ? 0 : c / g;
  Builder& b = ctx.b();
  Dims d4{n, g, cg, hw};
  Value x = hlo::reshape(hlo::convert(in, ce), d4);
  Value go = hlo::reshape(hlo::convert(ctx.tensor("grad_out"), ce), d4);
  Value mean = hlo::broadcast_in_dim(hlo::reshape(hlo::convert(ctx.tensor("mean"), ce), {n, g}), d4, {0, 1});
  Value rstd = hlo::broadcast_in_dim(hlo::reshape(hlo::convert(ctx.tensor("rstd"), ce), {n, g}), d4, {0, 1});
  Value xhat = hlo::mul(hlo::sub(x, mean), rstd);
  Value w = opt_channel(ctx, "weight", ce, c);
  Value gw = go;
  if (w.valid()) gw = hlo::mul(go, hlo::broadcast_in_dim(hlo::reshape(w, {g, cg}), d4, {1, 2}));
  auto m = ctx.arg("output_mask").toBoolList();
  std::vector<Value> out(3);
  if (m[0]) {
    double dd = static_cast<double>(cg * hw);
    Value s1 = hlo::broadcast_in_dim(hlo::reduce(gw, {2, 3}, hlo::ReduceKind::kSum), d4, {0, 1});
    Value s2 = hlo::broadcast_in_dim(hlo::reduce(hlo::mul(gw, xhat), {2, 3}, hlo::ReduceKind::kSum), d4, {0, 1});
    Value inv = hlo::full(b, ce, d4, dd == 0 ? 0.0 : 1.0 / dd);
    Value gi = hlo::sub(hlo::sub(gw, hlo::mul(s1, inv)), hlo::mul(xhat, hlo::mul(s2, inv)));
    out[0] = hlo::reshape(hlo::mul(gi, rstd), in.dims());
  } else {
    out[0] = hlo::constant(b, ce, 0);
  }
  out[1] = m[1] ? hlo::reshape(hlo::reduce(hlo::mul(go, xhat), {0, 3}, hlo::ReduceKind::kSum), {c})
                : hlo::constant(b, ce, 0);
  out[2] = m[2] ? hlo::reshape(hlo::reduce(go, {0, 3}, hlo::ReduceKind::kSum), {c}) : hlo::constant(b, ce, 0);
  return out;
}

// ---- weight norm ------------------------------------------------------------------------------

// w = v * g / ||v|| with the norm over every dim but `dim`.
TPU_LOWERING(_weight_norm_interface) {
  Value v0 = ctx.tensor("v");
  ElementType ce = acc_type(v0.element());
  Value v = hlo::convert(v0, ce);
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), v.rank());
  Dims red = all_but(v.rank(), {dim});
  Value norm = hlo::unary("sqrt", hlo::reduce(hlo::mul(v, v), red, hlo::ReduceKind::kSum));  // [v.dim(dim)]
  Value gg = hlo::reshape(hlo::convert(ctx.tensor("g"), ce), {v.dim(dim)});
  Value w = hlo::mul(v, hlo::broadcast_in_dim(hlo::div(gg, norm), v.dims(), {dim}));
  return {w, norm};
}

TPU_LOWERING(_weight_norm_interface_backward) {
  Value v0 = ctx.tensor("saved_v");
  ElementType ce = acc_type(v0.element());
  Value v = hlo::convert(v0, ce);
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), v.rank());
  int64_t k = v.dim(dim);
  Dims red = all_but(v.rank(), {dim});
  Value gw = hlo::convert(ctx.tensor("grad_w"), ce);
  Value gg = hlo::reshape(hlo::convert(ctx.tensor("saved_g"), ce), {k});
  Value norm = hlo::reshape(hlo::convert(ctx.tensor("saved_norms"), ce), {k});
  Value grad_g = hlo::div(hlo::reduce(hlo::mul(gw, v), red, hlo::ReduceKind::kSum), norm);
  auto bc = [&](Value t) { return hlo::broadcast_in_dim(t, v.dims(), {dim}); };
  Value grad_v = hlo::mul(bc(hlo::div(gg, norm)), hlo::sub(gw, hlo::mul(v, bc(hlo::div(grad_g, norm)))));
  return {grad_v, grad_g};
}

}  // namespace torch_tpu::lowering
