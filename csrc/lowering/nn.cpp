// Neural-network ops: softmax / log_softmax (+ backward), layer norm
// (+ backward), embedding backward, dropout (+ backward), nll_loss (1d and
// 2d, + backward), mse_loss (+ backward). Half-precision inputs are computed
// in f32 and rounded at the end, like CPU's accumulate types.
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <numeric>

#include "lowering/compute_util.h"
#include "lowering/index_check.h"
#include "lowering/norm_params.h"
#include "lowering/random_util.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

// Reduce over `dims` and broadcast the result back to x's shape.
Value reduce_keep(Value x, const Dims& dims, hlo::ReduceKind kind) {
  Value r = hlo::reduce(x, dims, kind);
  return hlo::broadcast_in_dim(r, x.dims(), all_but(x.rank(), dims));
}

// Softmax-family inputs: rank 0 becomes rank 1 (PyTorch treats a scalar as
// one element along dim 0).
Value at_least_1d(Value x) { return x.rank() == 0 ? hlo::reshape(x, {1}) : x; }

}  // namespace

// ---- softmax ------------------------------------------------------------------

TPU_LOWERING(_softmax) {
  Value in = ctx.tensor("self");
  Dims orig = in.dims();
  Value x = at_least_1d(hlo::convert(in, acc_type(in.element())));
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), static_cast<int64_t>(orig.size()));
  Value m = reduce_keep(x, {dim}, hlo::ReduceKind::kMax);
  Value e = hlo::unary("exponential", hlo::sub(x, m));
  Value s = reduce_keep(e, {dim}, hlo::ReduceKind::kSum);
  return {hlo::reshape(hlo::div(e, s), orig)};
}

TPU_LOWERING(_log_softmax) {
  Value in = ctx.tensor("self");
  Dims orig = in.dims();
  Value x = at_least_1d(hlo::convert(in, acc_type(in.element())));
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), static_cast<int64_t>(orig.size()));
  Value m = reduce_keep(x, {dim}, hlo::ReduceKind::kMax);
  // An all -inf slice gives nan like CPU (-inf - -inf).
  Value shifted = hlo::sub(x, m);
  Value s = reduce_keep(hlo::unary("exponential", shifted), {dim}, hlo::ReduceKind::kSum);
  return {hlo::reshape(hlo::sub(shifted, hlo::unary("log", s)), orig)};
}

TPU_LOWERING(_softmax_backward_data) {
  Value g0 = ctx.tensor("grad_output");
  Dims orig = g0.dims();
  ElementType ce = acc_type(g0.element());
  Value g = at_least_1d(hlo::convert(g0, ce));
  Value y = at_least_1d(hlo::convert(ctx.tensor("output"), ce));
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), static_cast<int64_t>(orig.size()));
  Value s = reduce_keep(hlo::mul(g, y), {dim}, hlo::ReduceKind::kSum);
  return {hlo::reshape(hlo::mul(y, hlo::sub(g, s)), orig)};
}

TPU_LOWERING(_log_softmax_backward_data) {
  Value g0 = ctx.tensor("grad_output");
  Dims orig = g0.dims();
  ElementType ce = acc_type(g0.element());
  Value g = at_least_1d(hlo::convert(g0, ce));
  Value y = at_least_1d(hlo::convert(ctx.tensor("output"), ce));
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), static_cast<int64_t>(orig.size()));
  Value s = reduce_keep(g, {dim}, hlo::ReduceKind::kSum);
  return {hlo::reshape(hlo::sub(g, hlo::mul(hlo::unary("exponential", y), s)), orig)};
}

// ---- layer norm -------------------------------------------------------------------

TPU_LOWERING(native_layer_norm) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  int64_t rank = x.rank();
  int64_t k = static_cast<int64_t>(ctx.ints_arg("normalized_shape").size());
  int64_t axis = rank - k;
  TORCH_CHECK(axis >= 0, "native_layer_norm: normalized_shape has more dims than the input");
  check_norm_params(ctx, "native_layer_norm", {"weight", "bias"});
  Dims red = range_dims(axis, rank);
  Dims xdims = x.dims();
  int64_t n = numel_of(x.dims(), axis);
  Value inv_n = hlo::full_like(x, 1.0 / static_cast<double>(n));
  Value mean = hlo::mul(reduce_keep(x, red, hlo::ReduceKind::kSum), inv_n);
  Value xc = hlo::sub(x, mean);
  Value var = hlo::mul(reduce_keep(hlo::mul(xc, xc), red, hlo::ReduceKind::kSum), inv_n);
  Value eps = hlo::full_like(x, ctx.float_arg("eps"));
  Value rstd = hlo::unary("rsqrt", hlo::add(var, eps));
  Value y = hlo::mul(xc, rstd);
  if (ctx.is_tensor("weight"))
    y = hlo::mul(y, hlo::broadcast_in_dim(hlo::convert(ctx.tensor("weight"), ce), xdims, red));
  if (ctx.is_tensor("bias"))
    y = hlo::add(y, hlo::broadcast_in_dim(hlo::convert(ctx.tensor("bias"), ce), xdims, red));
  // mean / rstd: input.shape[:axis] + [1] * k.
  Dims stat_dims(x.dims().begin(), x.dims().begin() + axis);
  Dims zeros(rank, 0), lim = x.dims();
  for (int64_t i = axis; i < rank; ++i) lim[i] = n > 0 ? 1 : 0;
  Dims stat_shape = stat_dims;
  for (int64_t i = 0; i < k; ++i) stat_shape.push_back(1);
  Value mean_s, rstd_s;
  if (n > 0) {
    mean_s = hlo::reshape(hlo::slice(mean, zeros, lim), stat_shape);
    rstd_s = hlo::reshape(hlo::slice(rstd, zeros, lim), stat_shape);
  } else {
    mean_s = hlo::full(ctx.b(), ce, stat_shape, std::nan(""));
    rstd_s = hlo::full(ctx.b(), ce, stat_shape, std::nan(""));
  }
  return {y, mean_s, rstd_s};
}

TPU_LOWERING(native_layer_norm_backward) {
  Value in = ctx.tensor("input");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  Value g = hlo::convert(ctx.tensor("grad_out"), ce);
  int64_t rank = x.rank();
  int64_t k = static_cast<int64_t>(ctx.ints_arg("normalized_shape").size());
  int64_t axis = rank - k;
  Dims red = range_dims(axis, rank);
  Dims batch = range_dims(0, axis);
  Dims xdims = x.dims();
  Dims stat_dims(x.dims().begin(), x.dims().begin() + axis);
  int64_t n = numel_of(x.dims(), axis);
  auto stat = [&](const char* name) {
    Value s = hlo::reshape(hlo::convert(ctx.tensor(name), ce), stat_dims);
    return hlo::broadcast_in_dim(s, xdims, batch);
  };
  Value mean = stat("mean"), rstd = stat("rstd");
  Value xhat = hlo::mul(hlo::sub(x, mean), rstd);
  bool has_w = ctx.is_tensor("weight");
  Value gw = g;
  if (has_w) gw = hlo::mul(g, hlo::broadcast_in_dim(hlo::convert(ctx.tensor("weight"), ce), xdims, red));
  auto mask = ctx.arg("output_mask").toBoolList();

  std::vector<Value> out(3);
  // Outputs that output_mask leaves out are undefined in the meta result;
  // the execution layer drops the value returned for them.
  auto placeholder = [&](int) { return hlo::constant(ctx.b(), in.element(), 0); };
  if (mask[0]) {
    Value s1 = reduce_keep(gw, red, hlo::ReduceKind::kSum);
    Value s2 = reduce_keep(hlo::mul(gw, xhat), red, hlo::ReduceKind::kSum);
    Value nn = hlo::full_like(x, static_cast<double>(n));
    Value inner = hlo::sub(hlo::sub(hlo::mul(nn, gw), s1), hlo::mul(xhat, s2));
    Value gi = hlo::mul(hlo::div(rstd, nn), inner);
    out[0] = hlo::convert(gi, in.element());
  } else {
    out[0] = placeholder(0);
  }
  ElementType wt = has_w ? element_type(ctx.tensor_arg("weight").scalar_type()) : in.element();
  ElementType bt = ctx.is_tensor("bias") ? element_type(ctx.tensor_arg("bias").scalar_type()) : in.element();
  out[1] = mask[1] ? hlo::convert(hlo::reduce(hlo::mul(g, xhat), batch, hlo::ReduceKind::kSum), wt) : placeholder(1);
  out[2] = mask[2] ? hlo::convert(hlo::reduce(g, batch, hlo::ReduceKind::kSum), bt) : placeholder(2);
  return out;
}

// ---- embedding ---------------------------------------------------------------------

TPU_LOWERING(embedding_dense_backward) {
  Value g0 = ctx.tensor("grad_output");
  ElementType ce = acc_type(g0.element());
  Value idx = ctx.tensor("indices");
  int64_t num_weights = ctx.int_arg("num_weights");
  int64_t padding_idx = ctx.int_arg("padding_idx");
  int64_t kidx = idx.type().numel();
  int64_t d = g0.rank() > idx.rank() ? g0.dims().back() : 1;
  Value g = hlo::reshape(hlo::convert(g0, ce), {kidx, d});
  Value i1 = hlo::reshape(hlo::convert(idx, ElementType::kI64), {kidx});
  Builder& b = ctx.b();
  Value keep = hlo::compare(i1, hlo::full(b, ElementType::kI64, {kidx}, static_cast<double>(padding_idx)), "NE");
  Value keep2 = hlo::broadcast_in_dim(keep, {kidx, d}, {0});
  g = hlo::select(keep2, g, hlo::full(b, ce, {kidx, d}, 0));
  Value idx2 = hlo::reshape(i1, {kidx, 1});
  if (ctx.bool_arg("scale_grad_by_freq")) {
    Value counts = hlo::scatter_1d(hlo::full(b, ce, {num_weights}, 0), i1, hlo::full(b, ce, {kidx}, 1), "add");
    Value c = hlo::gather_1d(counts, i1);  // [kidx]
    g = hlo::div(g, hlo::broadcast_in_dim(c, {kidx, d}, {0}));
  }
  hlo::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value out = hlo::scatter(hlo::full(b, ce, {num_weights, d}, 0), idx2, g, sd, "add");
  return {out};
}

// ---- dropout --------------------------------------------------------------------------

TPU_LOWERING(native_dropout) {
  Value in = ctx.tensor("input");
  double p = ctx.float_arg("p");
  auto train = ctx.is_none("train") ? std::optional<bool>() : std::optional<bool>(ctx.bool_arg("train"));
  Builder& b = ctx.b();
  if ((train.has_value() && !*train) || in.type().numel() == 0)
    return {in, hlo::full(b, ElementType::kPred, in.dims(), 1)};
  ElementType ce = in.element() == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
  double p1m = 1.0 - p;
  double scale = p1m == 0 ? 0.0 : 1.0 / p1m;
  Value u = uniform01(ctx.rng_key(), in.dims(), ce);
  Value mask = hlo::compare(u, hlo::full(b, ce, in.dims(), p1m), "LT");
  Value x = hlo::convert(in, ce);
  // input * mask * scale, so a dropped nan/inf still gives nan like CPU.
  Value y = hlo::mul(hlo::mul(x, hlo::convert(mask, ce)), hlo::full(b, ce, in.dims(), scale));
  return {y, mask};
}

TPU_LOWERING(native_dropout_backward) {
  Value g0 = ctx.tensor("grad_output");
  ElementType ce = acc_type(g0.element());
  Value g = hlo::convert(g0, ce);
  Value m = hlo::broadcast_to(hlo::convert(ctx.tensor("mask"), ce), g.dims());
  Value s = hlo::broadcast_to(ctx.operand("scale", scalar_type(ce)), g.dims());
  return {hlo::mul(hlo::mul(g, m), s)};
}

// ---- nll_loss ---------------------------------------------------------------------------

namespace {

struct NllParts {
  Value x;        // input in compute type
  Value onehot;   // i1, input shape: class == target
  Value w;        // per-target weight (0 where ignored), target shape
  Value valid;    // i1, target shape
  int64_t cdim;
  Dims tdims;     // target dims
};

NllParts nll_parts(LowerCtx& ctx) {
  NllParts p;
  Value in = ctx.tensor("self");
  ElementType ce = acc_type(in.element());
  p.x = hlo::convert(in, ce);
  p.cdim = p.x.rank() >= 2 ? 1 : 0;
  Builder& b = ctx.b();
  Dims tdims = all_but(p.x.rank(), {p.cdim});
  for (auto& d : tdims) d = p.x.dim(d);
  p.tdims = tdims;
  Value t = hlo::reshape(hlo::convert(ctx.tensor("target"), ElementType::kI64), tdims);
  Value tb = hlo::broadcast_in_dim(t, p.x.dims(), all_but(p.x.rank(), {p.cdim}));
  Value cls = hlo::iota(b, ElementType::kI64, p.x.dims(), p.cdim);
  p.onehot = hlo::compare(cls, tb, "EQ");
  p.valid = hlo::compare(t, hlo::full(b, ElementType::kI64, tdims, static_cast<double>(ctx.int_arg("ignore_index"))),
                         "NE");
  if (!ctx.has("grad_output")) {  // the forward checks the targets (CPU's IndexError), the backward need not
    int64_t classes = p.x.dim(p.cdim);
    Value out = hlo::binary("or", hlo::compare(t, hlo::full(b, ElementType::kI64, tdims, 0), "LT"),
                            hlo::compare(t, hlo::full(b, ElementType::kI64, tdims, static_cast<double>(classes)), "GE"));
    add_check(ctx, hlo::binary("and", p.valid, out), t, CheckKind::kTargetBounds, p.cdim, classes, CheckError::kIndex);
  }
  Value w;
  if (ctx.is_tensor("weight")) {
    Value wb = hlo::broadcast_in_dim(hlo::convert(ctx.tensor("weight"), ce), p.x.dims(), {p.cdim});
    w = hlo::reduce(hlo::select(p.onehot, wb, hlo::zeros_like(wb)), {p.cdim}, hlo::ReduceKind::kSum);
  } else {
    w = hlo::full(b, ce, tdims, 1);
  }
  p.w = hlo::select(p.valid, w, hlo::zeros_like(w));
  return p;
}

Dims all_dims(int64_t rank) { return range_dims(0, rank); }

}  // namespace

TPU_LOWERING(nll_loss_forward) {
  NllParts p = nll_parts(ctx);
  Value picked = hlo::reduce(hlo::select(p.onehot, p.x, hlo::zeros_like(p.x)), {p.cdim}, hlo::ReduceKind::kSum);
  Value loss = hlo::neg(hlo::mul(picked, p.w));
  loss = hlo::select(p.valid, loss, hlo::zeros_like(loss));
  int64_t reduction = ctx.int_arg("reduction");
  Builder& b = ctx.b();
  ElementType ce = p.x.element();
  if (reduction == 0) return {loss, hlo::constant(b, ce, 0)};
  Value total = hlo::reduce(loss, all_dims(loss.rank()), hlo::ReduceKind::kSum);
  Value tw = hlo::reduce(p.w, all_dims(p.w.rank()), hlo::ReduceKind::kSum);
  if (reduction == 1) total = hlo::div(total, tw);
  return {total, tw};
}
TPU_LOWERING_ALIAS(nll_loss2d_forward, nll_loss_forward);

TPU_LOWERING(nll_loss_backward) {
  NllParts p = nll_parts(ctx);
  ElementType ce = p.x.element();
  int64_t reduction = ctx.int_arg("reduction");
  Value go = hlo::convert(ctx.tensor("grad_output"), ce);
  Value scale;  // target shape
  if (reduction == 0) {
    scale = hlo::reshape(go, p.tdims);
  } else {
    Value g = hlo::reshape(go, {});
    if (reduction == 1) g = hlo::div(g, hlo::reshape(hlo::convert(ctx.tensor("total_weight"), ce), {}));
    scale = hlo::broadcast_in_dim(g, p.tdims, {});
  }
  Value v = hlo::neg(hlo::mul(p.w, scale));
  v = hlo::select(p.valid, v, hlo::zeros_like(v));
  Value vb = hlo::broadcast_in_dim(v, p.x.dims(), all_but(p.x.rank(), {p.cdim}));
  return {hlo::select(p.onehot, vb, hlo::zeros_like(vb))};
}
TPU_LOWERING_ALIAS(nll_loss2d_backward, nll_loss_backward);

// ---- mse_loss -------------------------------------------------------------------------------

TPU_LOWERING(mse_loss) {
  Value a0 = ctx.tensor("self");
  ElementType ce = acc_type(element_type(ctx.result_type({"self", "target"})));
  Value a = hlo::convert(a0, ce), t = hlo::convert(ctx.tensor("target"), ce);
  Dims dims;
  {  // numpy broadcast of the two shapes
    size_t r = std::max(a.dims().size(), t.dims().size());
    Dims out(r, 1);
    for (size_t i = 0; i < r; ++i) {
      int64_t da = i < r - a.dims().size() ? 1 : a.dims()[i - (r - a.dims().size())];
      int64_t dt = i < r - t.dims().size() ? 1 : t.dims()[i - (r - t.dims().size())];
      out[i] = da == 1 ? dt : da;
    }
    dims = out;
  }
  a = hlo::broadcast_to(a, dims);
  t = hlo::broadcast_to(t, dims);
  Value d = hlo::sub(a, t);
  Value sq = hlo::mul(d, d);
  int64_t reduction = ctx.int_arg("reduction");
  if (reduction == 0) return {sq};
  Value s = hlo::reduce(sq, all_dims(sq.rank()), hlo::ReduceKind::kSum);
  if (reduction == 1) s = hlo::div(s, hlo::constant(ctx.b(), ce, static_cast<double>(numel_of(dims))));
  return {s};
}

TPU_LOWERING(mse_loss_backward) {
  Value a0 = ctx.tensor("self");
  ElementType ce = acc_type(a0.element());
  Dims dims = *ctx.out_sizes(0);
  Value a = hlo::broadcast_to(hlo::convert(a0, ce), dims);
  Value t = hlo::broadcast_to(hlo::convert(ctx.tensor("target"), ce), dims);
  Value g = hlo::broadcast_to(hlo::convert(ctx.tensor("grad_output"), ce), dims);
  int64_t reduction = ctx.int_arg("reduction");
  double norm = reduction == 1 ? 2.0 / static_cast<double>(numel_of(dims)) : 2.0;
  Value d = hlo::sub(a, t);
  return {hlo::mul(hlo::mul(d, hlo::full(ctx.b(), ce, dims, norm)), g)};
}

}  // namespace torch_tpu::lowering
