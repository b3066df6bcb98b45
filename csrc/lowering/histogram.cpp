// Histograms with fixed output sizes: histogram (bin count or bin edges),
// histogramdd's pieces (_histogramdd_bin_edges, _histogramdd_from_bin_cts,
// _histogramdd_from_bin_tensors). histc is in sort.cpp.
//
// Like PyTorch CPU: edges are linspace(left, right, bins + 1) in the input
// dtype, with [left, right] the given range or the data's min/max (widened by
// 0.5 when equal, [0, 1] for empty input); an element lands in the last edge
// not above it, the rightmost edge belongs to the last bin, elements outside
// (and NaNs) are dropped; counts (or weights) accumulate in the input dtype;
// density divides by the total and by each bin's width. A data range that is
// not finite (inf in the data) is not reported: that would need a sync.
#include <c10/util/Exception.h>

#include <cmath>
#include <optional>

#include "lowering/compute_util.h"
#include "lowering/elementwise_util.h"
#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

using ew::and_;

void check_float(LowerCtx& ctx, at::ScalarType t) {
  TORCH_CHECK(t == at::kFloat || t == at::kDouble, ctx.op_name(), ": input must be float32 or float64 (as on CPU), got ",
              t);
}

// linspace(left, right, n) in element type `e` as CPU computes it: the first
// half counts up from left, the second half down from right.
Value linspace(Builder& b, Value left, Value right, int64_t n, ElementType e) {
  Value l = hlo::broadcast_in_dim(hlo::convert(left, e), {n}, {});
  if (n == 1) return l;
  Value r = hlo::broadcast_in_dim(hlo::convert(right, e), {n}, {});
  Value idx = hlo::iota(b, e, {n}, 0);
  // Barrier: keep XLA from replacing the division by a reciprocal multiply.
  Value div = b.emit("optimization_barrier", {hlo::full(b, e, {n}, static_cast<double>(n - 1))}, hlo::TensorType{e, {n}});
  Value step = hlo::div(hlo::sub(r, l), div);
  Value up = hlo::add(l, hlo::mul(idx, step));
  Value down = hlo::sub(r, hlo::mul(hlo::sub(hlo::full(b, e, {n}, static_cast<double>(n - 1)), idx), step));
  return hlo::select(hlo::compare(idx, hlo::full(b, e, {n}, static_cast<double>(n / 2)), "LT"), up, down);
}

// Edges for each of the N columns of x [M, N] from bin counts and an
// optional range [l0, r0, l1, r1, ...].
std::vector<Value> edges_from_counts(LowerCtx& ctx, Value x, const std::vector<int64_t>& bins,
                                     const std::optional<std::vector<double>>& range) {
  Builder& b = ctx.b();
  int64_t m = x.dim(0), n = x.dim(1);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == n, ctx.op_name(), ": expected ", n, " bin counts for a ", n,
              "-dimensional histogram but got ", bins.size());
  auto F = ElementType::kF64;
  std::vector<Value> out;
  for (int64_t d = 0; d < n; ++d) {
    TORCH_CHECK(bins[d] > 0, "torch.histogram(): bins must be > 0, but got ", bins[d], " for dimension ", d);
    Value lo, hi;
    if (range) {
      TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * n, "torch.histogramdd: for a ", n,
                  "-dimensional histogram range should have ", 2 * n, " elements, but got ", range->size());
      double l = (*range)[2 * d], r = (*range)[2 * d + 1];
      TORCH_CHECK(std::isfinite(l) && std::isfinite(r), "torch.histogramdd: dimension ", d, "'s range [", l, ", ",
                  r, "] is not finite");
      TORCH_CHECK(l <= r, "torch.histogramdd: min should not exceed max, but got min ", l, " max ", r,
                  " for dimension ", d);
      if (l == r) l -= 0.5, r += 0.5;
      lo = hlo::constant(b, F, l);
      hi = hlo::constant(b, F, r);
    } else if (m == 0) {
      lo = hlo::constant(b, F, 0);
      hi = hlo::constant(b, F, 1);
    } else {
      Value col = hlo::reshape(hlo::slice(x, {0, d}, {m, d + 1}), {m});
      lo = hlo::convert(hlo::reduce(col, {0}, hlo::ReduceKind::kMin), F);
      hi = hlo::convert(hlo::reduce(col, {0}, hlo::ReduceKind::kMax), F);
      // CPU's check of the range taken from the data (inf or NaN in it)
      check_data(ctx, ew::or_(ew::not_finite(lo), ew::not_finite(hi)),
                 "torch.histogramdd: dimension " + std::to_string(d) +
                     "'s range [min, max] of the input is not finite (it holds inf or NaN)");
      Value same = hlo::compare(lo, hi, "EQ");
      Value half = hlo::constant(b, F, 0.5);
      lo = hlo::select(same, hlo::sub(lo, half), lo);
      hi = hlo::select(same, hlo::add(hi, half), hi);
    }
    out.push_back(linspace(b, lo, hi, bins[d] + 1, x.element()));
  }
  return out;
}

// Histogram of the rows of x [M, N] over per-column `edges`; `weight` [M] or
// invalid.
Value histogram_nd(LowerCtx& ctx, Value x, const std::vector<Value>& edges, Value weight, bool density) {
  Builder& b = ctx.b();
  int64_t m = x.dim(0), n = x.dim(1);
  ElementType e = x.element();
  auto I = ElementType::kI64;
  Dims hist_dims;
  int64_t total = 1;
  for (const auto& ed : edges) {
    hist_dims.push_back(ed.dim(0) - 1);
    total *= ed.dim(0) - 1;
  }
  Value flat = hlo::full(b, I, {m}, 0);
  Value ok = hlo::full(b, ElementType::kPred, {m}, 1);
  for (int64_t d = 0; d < n; ++d) {
    int64_t ne = edges[d].dim(0);
    Value col = hlo::reshape(hlo::slice(x, {0, d}, {m, d + 1}), {m});
    Value first = hlo::broadcast_in_dim(hlo::reshape(hlo::slice(edges[d], {0}, {1}), {}), {m}, {});
    Value last = hlo::broadcast_in_dim(hlo::reshape(hlo::slice(edges[d], {ne - 1}, {ne}), {}), {m}, {});
    ok = and_(ok, and_(hlo::compare(col, first, "GE"), hlo::compare(col, last, "LE")));
    // Number of edges <= x, minus one: the bin whose left edge is x's floor.
    Value le = hlo::compare(hlo::broadcast_in_dim(edges[d], {m, ne}, {1}), hlo::broadcast_in_dim(col, {m, ne}, {0}), "LE");
    Value pos = hlo::sub(hlo::reduce(hlo::convert(le, I), {1}, hlo::ReduceKind::kSum), hlo::full(b, I, {m}, 1));
    pos = hlo::clamp(hlo::constant_int(b, I, 0), pos, hlo::constant_int(b, I, ne - 2));
    flat = hlo::add(hlo::mul(flat, hlo::full(b, I, {m}, static_cast<double>(ne - 1))), pos);
  }
  // Dropped rows go to a spare slot that is cut off.
  flat = hlo::select(ok, flat, hlo::full(b, I, {m}, static_cast<double>(total)));
  Value w = weight.valid() ? hlo::convert(weight, e) : hlo::full(b, e, {m}, 1);
  Value hist = hlo::slice(hlo::scatter_1d(hlo::full(b, e, {total + 1}, 0), flat, w, "add"), {0}, {total});
  hist = hlo::reshape(hist, hist_dims);
  if (density) {
    Value sum = hlo::reduce(hist, range_dims(0, hist.rank()), hlo::ReduceKind::kSum);
    hist = hlo::div(hist, hlo::broadcast_in_dim(sum, hist_dims, {}));
    for (int64_t d = 0; d < n; ++d) {
      int64_t ne = edges[d].dim(0);
      Value width = hlo::sub(hlo::slice(edges[d], {1}, {ne}), hlo::slice(edges[d], {0}, {ne - 1}));
      hist = hlo::div(hist, hlo::broadcast_in_dim(width, hist_dims, {d}));
    }
  }
  return hist;
}

// The input as [M, N] rows (histogramdd: all but the last dim flattened).
Value rows(LowerCtx& ctx, int64_t n) {
  const at::Tensor& self = ctx.tensor_arg("self");
  check_float(ctx, self.scalar_type());
  return hlo::reshape(ctx.tensor("self"), {n == 0 ? 0 : self.numel() / n, n});
}

// The optional weight, flattened to [M] and checked against the input.
Value weight_of(LowerCtx& ctx, bool dd) {
  if (!ctx.has("weight") || ctx.is_none("weight")) return Value();
  const at::Tensor& self = ctx.tensor_arg("self");
  const at::Tensor& w = ctx.tensor_arg("weight");
  TORCH_CHECK(w.scalar_type() == self.scalar_type(), "torch.histogramdd: if weight tensor is provided, input tensor "
              "and weight tensor should have the same dtype, but got input(", self.scalar_type(), "), and weight(",
              w.scalar_type(), ")");
  // histogram flattens both input and weight; histogramdd drops the
  // input's last dim (a 0-dim weight counts as [1]).
  auto expect = dd ? self.sizes().vec() : std::vector<int64_t>{self.numel()};
  if (dd) expect.pop_back();
  auto got = dd ? w.sizes().vec() : std::vector<int64_t>{w.numel()};
  if (got.empty()) got = {1};
  TORCH_CHECK(expect == got, "torch.histogramdd: if weight tensor is provided it should have the same shape as the "
              "input tensor excluding its innermost dimension, but got input with shape ", self.sizes(),
              " and weight with shape ", w.sizes());
  return hlo::reshape(ctx.tensor("weight"), {w.numel()});
}

std::optional<std::vector<double>> range_of(LowerCtx& ctx) {
  if (!ctx.has("range") || ctx.is_none("range")) return std::nullopt;
  return ctx.arg("range").toDoubleVector();
}

void check_edges(LowerCtx& ctx, const at::Tensor& self, const at::Tensor& e, int64_t d) {
  TORCH_CHECK(e.scalar_type() == self.scalar_type(), "torch.histogramdd: input tensor and bins tensors should have "
              "the same dtype, but got input with dtype ", self.scalar_type(), " and bins for dimension ", d,
              " with dtype ", e.scalar_type());
  TORCH_CHECK(e.dim() == 1, "torch.histogramdd: bins tensor should have one dimension, but got ", e.dim(),
              " dimensions in the bins tensor for dimension ", d);
  TORCH_CHECK(e.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element, but got ", e.numel(),
              " elements in the bins tensor for dimension ", d);
}

}  // namespace

// histogram.bin_ct(self, bins, *, range, weight, density) and
// histogram.bins_tensor(self, bins, *, weight, density): (hist, bin_edges).
TPU_LOWERING(histogram) {
  const at::Tensor& self = ctx.tensor_arg("self");
  Value x = rows(ctx, 1);
  bool density = ctx.bool_arg("density");
  Value edges;
  if (ctx.is_tensor("bins")) {
    check_edges(ctx, self, ctx.tensor_arg("bins"), 0);
    edges = ctx.tensor("bins");
  } else {
    edges = edges_from_counts(ctx, x, {ctx.int_arg("bins")}, range_of(ctx))[0];
  }
  return {histogram_nd(ctx, x, {edges}, weight_of(ctx, false), density), edges};
}

// _histogramdd_bin_edges(self, bins, *, range, weight, density) -> Tensor[]
TPU_LOWERING(_histogramdd_bin_edges) {
  const at::Tensor& self = ctx.tensor_arg("self");
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  return edges_from_counts(ctx, rows(ctx, self.size(-1)), ctx.ints_arg("bins"), range_of(ctx));
}

// _histogramdd_from_bin_cts(self, bins, *, range, weight, density)
TPU_LOWERING(_histogramdd_from_bin_cts) {
  const at::Tensor& self = ctx.tensor_arg("self");
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
              self.dim());
  Value x = rows(ctx, self.size(-1));
  auto edges = edges_from_counts(ctx, x, ctx.ints_arg("bins"), range_of(ctx));
  return {histogram_nd(ctx, x, edges, weight_of(ctx, true), ctx.bool_arg("density"))};
}

// _histogramdd_from_bin_tensors(self, bins, *, weight, density)
TPU_LOWERING(_histogramdd_from_bin_tensors) {
  const at::Tensor& self = ctx.tensor_arg("self");
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
              self.dim());
  int64_t n = self.size(-1);
  auto list = ctx.arg("bins").toTensorVector();
  TORCH_CHECK(static_cast<int64_t>(list.size()) == n, "torch.histogramdd: expected ", n,
              " sequences of bin edges for a ", n, "-dimensional histogram but got ", list.size());
  for (int64_t d = 0; d < n; ++d) check_edges(ctx, self, list[d], d);
  Value x = rows(ctx, n);
  return {histogram_nd(ctx, x, ctx.tensor_list("bins"), weight_of(ctx, true), ctx.bool_arg("density"))};
}

}  // namespace torch_tpu::lowering
