// More shape-family ops that reach the engine (the rest of the family, such
// as repeat, rot90, diag_embed, stack or the *_copy ops, decomposes through
// CompositeExplicitAutograd kernels into ops lowered elsewhere):
// narrow_copy.out, channel_shuffle, tril_indices / triu_indices,
// and the distance ops _cdist_forward / _cdist_backward / _pdist_forward /
// _pdist_backward / _euclidean_dist.
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

#include "lowering/compute_util.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

Value zeros(LowerCtx& ctx, int i = 0) {
  return hlo::full(ctx.b(), element_type(*ctx.out_dtype(i)), *ctx.out_sizes(i), 0);
}

// A 2 x n i64 constant.
Value constant_i64_pairs(Builder& b, const Dims& first, const Dims& second) {
  Value a = hlo::reshape(hlo::constant_i64_vector(b, first), {1, static_cast<int64_t>(first.size())});
  Value c = hlo::reshape(hlo::constant_i64_vector(b, second), {1, static_cast<int64_t>(second.size())});
  return hlo::concatenate({a, c}, 0);
}

// Sums `x` down to `dims` (numpy broadcasting in reverse).
Value sum_to(Value x, const Dims& dims) {
  if (x.dims() == dims) return x;
  int64_t lead = x.rank() - static_cast<int64_t>(dims.size());
  Dims red;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i < lead || (dims[i - lead] == 1 && x.dim(i) != 1)) red.push_back(i);
  return hlo::reshape(hlo::reduce(x, red, hlo::ReduceKind::kSum), dims);
}

ElementType compute_type(ElementType e) {
  return e == ElementType::kBF16 || e == ElementType::kF16 ? ElementType::kF32 : e;
}

Value sign(Value x) { return hlo::unary("sign", x); }

Value pow_scalar(Value x, double p) { return hlo::binary("power", x, hlo::full_like(x, p)); }

// The p-norm of `diff` over its last dim, as PyTorch's distance kernels
// compute it (p = 0 counts non-zeros, p = inf takes the max).
Value lp_norm_last(Value diff, double p) {
  int64_t last = diff.rank() - 1;
  Value ad = hlo::unary("abs", diff);
  if (p == 0) {
    Value nz = hlo::compare(ad, hlo::zeros_like(ad), "NE");
    return hlo::reduce(hlo::select(nz, hlo::full_like(ad, 1), hlo::zeros_like(ad)), {last}, hlo::ReduceKind::kSum);
  }
  if (std::isinf(p)) {
    Value m = hlo::reduce(ad, {last}, hlo::ReduceKind::kMax);
    return hlo::max(m, hlo::zeros_like(m));  // an empty last dim gives 0
  }
  if (p == 1) return hlo::reduce(ad, {last}, hlo::ReduceKind::kSum);
  if (p == 2) return hlo::unary("sqrt", hlo::reduce(hlo::mul(ad, ad), {last}, hlo::ReduceKind::kSum));
  Value s = hlo::reduce(pow_scalar(ad, p), {last}, hlo::ReduceKind::kSum);
  return pow_scalar(s, 1.0 / p);
}

// d dist / d x1 times the incoming gradient, elementwise (all operands of
// one shape), as PyTorch's CPU Dist<>::backward kernels compute it.
Value lp_norm_grad(Value diff, Value grad, Value dist, double p) {
  Value zero = hlo::zeros_like(diff);
  if (p == 0) return zero;
  if (p == 1) return hlo::mul(sign(diff), grad);
  Value dist_zero = hlo::compare(dist, zero, "EQ");
  if (std::isinf(p)) {
    Value is_max = hlo::compare(hlo::unary("abs", diff), dist, "EQ");
    return hlo::select(is_max, hlo::mul(sign(diff), grad), zero);
  }
  if (p == 2) return hlo::select(dist_zero, zero, hlo::div(hlo::mul(grad, diff), dist));
  Value ad = hlo::unary("abs", diff);
  if (p < 2) {
    Value r = hlo::div(hlo::mul(hlo::mul(sign(diff), pow_scalar(ad, p - 1)), grad), pow_scalar(dist, p - 1));
    Value drop = dist_zero;
    if (p < 1) drop = hlo::binary("or", drop, hlo::compare(diff, zero, "EQ"));
    return hlo::select(drop, zero, r);
  }
  Value r = hlo::div(hlo::mul(hlo::mul(diff, pow_scalar(ad, p - 2)), grad), pow_scalar(dist, p - 1));
  return hlo::select(dist_zero, zero, r);
}

// x1 [B.., P, M] and x2 [B.., R, M] broadcast to the batch of `batch` and
// subtracted pairwise: [B.., P, R, M].
Value pairwise_diff(Value x1, Value x2, const Dims& batch, ElementType e) {
  int64_t nb = static_cast<int64_t>(batch.size());
  int64_t P = x1.dim(x1.rank() - 2), R = x2.dim(x2.rank() - 2), M = x1.dim(x1.rank() - 1);
  Dims d1 = batch, d2 = batch, d = batch;
  d1.insert(d1.end(), {P, M});
  d2.insert(d2.end(), {R, M});
  d.insert(d.end(), {P, R, M});
  Dims ids;
  for (int64_t i = 0; i < nb; ++i) ids.push_back(i);
  Dims i1 = ids, i2 = ids;
  i1.insert(i1.end(), {nb, nb + 2});
  i2.insert(i2.end(), {nb + 1, nb + 2});
  Value a = hlo::broadcast_in_dim(hlo::broadcast_to(hlo::convert(x1, e), d1), d, i1);
  Value c = hlo::broadcast_in_dim(hlo::broadcast_to(hlo::convert(x2, e), d2), d, i2);
  return hlo::sub(a, c);
}

// Every pair (i, j), i < j < n, in row-major order: pdist's layout.
void pdist_pairs(int64_t n, Dims& is, Dims& js) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      is.push_back(i);
      js.push_back(j);
    }
}

}  // namespace

// narrow_copy.out (the functional form decomposes into narrow + clone).
TPU_LOWERING(narrow_copy) {
  Value x = ctx.tensor("self");
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  int64_t n = x.dim(dim), start = ctx.int_arg("start"), length = ctx.int_arg("length");
  TORCH_CHECK_INDEX(-n <= start && start <= n, "start out of range (expected to be in range of [", -n, ", ", n,
                    "], but got ", start, ")");
  if (start < 0) start += n;
  TORCH_CHECK(length >= 0 && start <= n - length, "start (", start, ") + length (", length,
              ") exceeds dimension size (", n, ").");
  Dims lo(x.rank(), 0), hi = x.dims();
  lo[dim] = start;
  hi[dim] = start + length;
  return {hlo::slice(x, lo, hi)};
}

// channel_shuffle(self [N, C, *], groups): [N, g, C/g, *] -> [N, C/g, g, *].
TPU_LOWERING(channel_shuffle) {
  Value x = ctx.tensor("self");
  int64_t g = ctx.int_arg("groups");
  if (x.type().numel() == 0) return {hlo::zeros_like(x)};
  Dims split = x.dims();
  split[1] = x.dim(1) / g;
  split.insert(split.begin() + 1, g);
  Dims perm;
  for (int64_t i = 0; i < static_cast<int64_t>(split.size()); ++i) perm.push_back(i);
  std::swap(perm[1], perm[2]);
  return {hlo::reshape(hlo::transpose(hlo::reshape(x, split), perm), x.dims())};
}

namespace {

std::vector<Value> triangle_indices(LowerCtx& ctx, bool lower) {
  int64_t rows = ctx.int_arg("row"), cols = ctx.int_arg("col"), offset = ctx.int_arg("offset");
  Dims rs, cs;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t lo = lower ? 0 : std::max<int64_t>(0, r + offset);
    int64_t hi = lower ? std::min<int64_t>(cols, r + offset + 1) : cols;
    for (int64_t c = lo; c < hi; ++c) {
      rs.push_back(r);
      cs.push_back(c);
    }
  }
  if (rs.empty()) return {zeros(ctx)};
  return {constant_i64_pairs(ctx.b(), rs, cs)};
}

}  // namespace

TPU_LOWERING(tril_indices) { return triangle_indices(ctx, true); }
TPU_LOWERING(triu_indices) { return triangle_indices(ctx, false); }


// _cdist_forward(x1 [B.., P, M], x2 [B.., R, M], p, compute_mode) -> [B.., P, R].
TPU_LOWERING(_cdist_forward) {
  Value x1 = ctx.tensor("x1"), x2 = ctx.tensor("x2");
  double p = ctx.float_arg("p");
  Dims out = *ctx.out_sizes();
  if (numel_of(out) == 0 || x1.dim(x1.rank() - 1) == 0) return {zeros(ctx)};
  Dims batch(out.begin(), out.end() - 2);
  Value diff = pairwise_diff(x1, x2, batch, compute_type(x1.element()));
  return {lp_norm_last(diff, p)};
}

// _euclidean_dist(x1, x2): the p = 2 distance.
TPU_LOWERING(_euclidean_dist) {
  Value x1 = ctx.tensor("x1"), x2 = ctx.tensor("x2");
  Dims out = *ctx.out_sizes();
  if (numel_of(out) == 0 || x1.dim(x1.rank() - 1) == 0) return {zeros(ctx)};
  Dims batch(out.begin(), out.end() - 2);
  return {lp_norm_last(pairwise_diff(x1, x2, batch, compute_type(x1.element())), 2.0)};
}

// _cdist_backward(grad [B.., P, R], x1, x2, p, cdist) -> gradient for x1
// (over the broadcast batch; autograd sums it to x1's shape).
TPU_LOWERING(_cdist_backward) {
  Value x1 = ctx.tensor("x1"), x2 = ctx.tensor("x2");
  double p = ctx.float_arg("p");
  Dims out = *ctx.out_sizes();
  const at::Tensor& gt = ctx.tensor_arg("grad");
  if (numel_of(out) == 0 || gt.numel() == 0 || p == 0) return {zeros(ctx)};
  ElementType e = compute_type(x1.element());
  Dims gdims = gt.sizes().vec();
  Dims batch(gdims.begin(), gdims.end() - 2);
  int64_t nb = static_cast<int64_t>(batch.size());
  Value diff = pairwise_diff(x1, x2, batch, e);
  Dims ids;
  for (int64_t i = 0; i < nb + 2; ++i) ids.push_back(i);
  Value grad = hlo::broadcast_in_dim(hlo::convert(ctx.tensor("grad"), e), diff.dims(), ids);
  Value dist = hlo::broadcast_in_dim(hlo::broadcast_to(hlo::convert(ctx.tensor("cdist"), e), gdims), diff.dims(), ids);
  Value g = hlo::reduce(lp_norm_grad(diff, grad, dist, p), {nb + 1}, hlo::ReduceKind::kSum);
  return {sum_to(g, out)};
}

// _pdist_forward(self [N, M], p) -> [N (N - 1) / 2]: distances of rows i < j.
TPU_LOWERING(_pdist_forward) {
  Value x = ctx.tensor("self");
  double p = ctx.float_arg("p");
  Dims out = *ctx.out_sizes();
  if (numel_of(out) == 0 || x.dim(1) == 0) return {zeros(ctx)};
  Dims is, js;
  pdist_pairs(x.dim(0), is, js);
  x = hlo::convert(x, compute_type(x.element()));
  Value a = hlo::take_along_dim(x, 0, hlo::constant_i64_vector(ctx.b(), is));
  Value c = hlo::take_along_dim(x, 0, hlo::constant_i64_vector(ctx.b(), js));
  return {lp_norm_last(hlo::sub(a, c), p)};
}

// _pdist_backward(grad [K], self [N, M], p, pdist [K]) -> [N, M]: each pair's
// gradient adds into row i and subtracts from row j.
TPU_LOWERING(_pdist_backward) {
  Value x = ctx.tensor("self");
  double p = ctx.float_arg("p");
  Dims out = *ctx.out_sizes();
  int64_t n = x.dim(0), m = x.dim(1);
  if (numel_of(out) == 0 || n < 2 || p == 0) return {zeros(ctx)};
  ElementType e = compute_type(x.element());
  Dims is, js;
  pdist_pairs(n, is, js);
  int64_t k = static_cast<int64_t>(is.size());
  Value ii = hlo::constant_i64_vector(ctx.b(), is), jj = hlo::constant_i64_vector(ctx.b(), js);
  x = hlo::convert(x, e);
  Value diff = hlo::sub(hlo::take_along_dim(x, 0, ii), hlo::take_along_dim(x, 0, jj));
  Value grad = hlo::broadcast_in_dim(hlo::convert(ctx.tensor("grad"), e), {k, m}, {0});
  Value dist = hlo::broadcast_in_dim(hlo::convert(ctx.tensor("pdist"), e), {k, m}, {0});
  Value g = lp_norm_grad(diff, grad, dist, p);
  Value r = hlo::add(hlo::scatter_add_along_dim(g, 0, ii, n), hlo::scatter_add_along_dim(hlo::neg(g), 0, jj, n));
  return {r};
}

}  // namespace torch_tpu::lowering
