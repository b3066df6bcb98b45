// Sorting and selection: sort (argsort and msort reach it), topk, kthvalue,
// median, nanmedian, mode; searching: searchsorted, bucketize; histc.
//
// Everything that orders values goes through one stable sort whose
// comparator puts NaN above every number and treats -0.0 and +0.0 as equal,
// like PyTorch's CPU kernels; ties therefore resolve to the lowest input
// index (PyTorch's median/nanmedian do the same; topk/kthvalue leave ties
// unspecified).
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <cmath>

#include "lowering/elementwise_util.h"
#include "lowering/index_check.h"
#include "lowering/sort_scan.h"

namespace torch_tpu::lowering {

namespace sortscan {

namespace {

Value is_nan(Value x) { return hlo::compare(x, x, "NE"); }

}  // namespace

std::pair<Value, Value> sort_with_indices(Value x, int64_t dim, bool descending) {
  Builder& b = x.builder();
  Dims in_dims = x.dims();
  if (x.rank() == 0) {
    x = hlo::reshape(x, {1});
    dim = 0;
  }
  Value idx = hlo::iota(b, ElementType::kI64, x.dims(), dim);
  if (x.type().numel() == 0 || x.dim(dim) <= 1) return {hlo::reshape(x, in_dims), hlo::reshape(idx, in_dims)};
  ElementType e = x.element();
  bool fl = hlo::is_float(e);
  std::vector<hlo::TensorType> region_args;
  for (ElementType t : {e, e, ElementType::kI64, ElementType::kI64}) region_args.push_back(hlo::TensorType{t, {}});
  auto out = b.emit_multi(
      "sort", {x, idx}, {x.type(), idx.type()},
      "dimension = " + std::to_string(dim) + " : i64, is_stable = true", region_args,
      [descending, fl](Builder&, const std::vector<Value>& a) {
        // "a goes before b": a < b ascending, a > b descending; NaN largest.
        Value lhs = a[0], rhs = a[1];
        Value r = hlo::compare(lhs, rhs, descending ? "GT" : "LT");
        if (fl) {
          Value big = descending ? lhs : rhs, small = descending ? rhs : lhs;
          r = hlo::binary("or", r, hlo::binary("and", is_nan(big), hlo::unary("not", is_nan(small))));
        }
        return std::vector<Value>{r};
      });
  return {hlo::reshape(out[0], in_dims), hlo::reshape(out[1], in_dims)};
}

Value take_last(Value x, Value k) {
  Builder& b = x.builder();
  Dims outer = k.dims();
  int64_t n = x.dims().back();
  int64_t m = 1;
  for (auto d : outer) m *= d;
  Value row = hlo::iota(b, ElementType::kI64, {m}, 0);
  Value flat_k = hlo::reshape(hlo::convert(k, ElementType::kI64), {m});
  Value pos = hlo::add(hlo::mul(row, hlo::full_like(row, static_cast<double>(n))), flat_k);
  Value flat_x = hlo::reshape(x, {m * n});
  return hlo::reshape(hlo::gather_1d(flat_x, pos), outer);
}

Value move_to_last(Value x, int64_t dim) {
  int64_t r = x.rank();
  if (r == 0 || dim == r - 1) return x;
  Dims perm;
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) perm.push_back(i);
  perm.push_back(dim);
  return hlo::transpose(x, perm);
}

}  // namespace sortscan

namespace {

using sortscan::sort_with_indices;
using sortscan::take_last;

Value is_nan(Value x) { return hlo::compare(x, x, "NE"); }

// `x` (size-1 dim `dim` kept) shaped for keepdim or with `dim` dropped.
Value squeeze_unless(Value x, int64_t dim, bool keep) {
  if (keep || x.rank() == 0) return x;
  Dims d = x.dims();
  d.erase(d.begin() + dim);
  return hlo::reshape(x, d);
}

// Slice [k, k+1) along dim.
Value at_index(Value x, int64_t dim, int64_t k) {
  Dims start(x.rank(), 0), limit = x.dims();
  start[dim] = k;
  limit[dim] = k + 1;
  return hlo::slice(x, start, limit);
}

int64_t dim_size(const at::Tensor& t, int64_t dim) { return t.dim() == 0 ? 1 : t.size(dim); }

// Elements [first, last] of its storage that `t` can touch.
std::pair<int64_t, int64_t> extent(const at::Tensor& t) {
  int64_t lo = t.storage_offset(), hi = lo;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return {0, -1};
    (t.stride(d) < 0 ? lo : hi) += (t.size(d) - 1) * t.stride(d);
  }
  return {lo, hi};
}

// at::assert_no_overlap for an out= argument and the input (CPU's check).
void check_no_overlap(LowerCtx& ctx, std::string_view in, std::string_view out) {
  if (!ctx.has(out) || !ctx.is_tensor(out)) return;
  const at::Tensor& a = ctx.tensor_arg(in);
  const at::Tensor& o = ctx.tensor_arg(out);
  if (!a.defined() || !o.defined() || !a.storage().is_alias_of(o.storage())) return;
  if (a.element_size() != o.element_size()) return;
  auto [alo, ahi] = extent(a);
  auto [olo, ohi] = extent(o);
  TORCH_CHECK(ahi < olo || ohi < alo,
              "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
              "memory location. Please clone() the tensor before performing the operation.");
}

}  // namespace

// ---- sort / topk / kthvalue ------------------------------------------------------

TPU_LOWERING(sort) {
  Value x = ctx.tensor("self");
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  auto [v, i] = sort_with_indices(x, dim, ctx.bool_arg("descending"));
  return {v, i};
}

TPU_LOWERING(topk) {
  Value x = ctx.tensor("self");
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  int64_t k = ctx.int_arg("k");
  int64_t n = dim_size(ctx.tensor_arg("self"), dim);
  TORCH_CHECK_INDEX(k >= 0 && k <= n, "selected index k out of range");
  auto [v, i] = sort_with_indices(x, dim, ctx.bool_arg("largest"));
  if (x.rank() == 0) return {v, i};
  Dims start(x.rank(), 0), limit = x.dims();
  limit[dim] = k;
  return {hlo::slice(v, start, limit), hlo::slice(i, start, limit)};
}

TPU_LOWERING(kthvalue) {
  Value x = ctx.tensor("self");
  const at::Tensor& self = ctx.tensor_arg("self");
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  int64_t k = ctx.int_arg("k");
  TORCH_CHECK(self.numel() > 0, "cannot perform reduction function kthvalue on tensor with no elements because the "
              "operation does not have an identity");
  TORCH_CHECK(k > 0 && k <= dim_size(self, dim), "kthvalue(): selected number k out of range for dimension ", dim);
  check_no_overlap(ctx, "self", "values");
  bool keep = ctx.bool_arg("keepdim");
  if (x.rank() == 0) return {x, hlo::constant_int(ctx.b(), ElementType::kI64, 0)};
  auto [v, i] = sort_with_indices(x, dim, false);
  return {squeeze_unless(at_index(v, dim, k - 1), dim, keep), squeeze_unless(at_index(i, dim, k - 1), dim, keep)};
}

// ---- median / nanmedian -----------------------------------------------------------

namespace {

// median (ignore_nan=false) and nanmedian: the lower median, NaN handling of
// PyTorch CPU (median: any NaN gives NaN, and its first index; nanmedian:
// median of the non-NaN values, NaN when there are none).
std::vector<Value> median_impl(LowerCtx& ctx, bool ignore_nan) {
  Value x = ctx.tensor("self");
  const at::Tensor& self = ctx.tensor_arg("self");
  Builder& b = ctx.b();
  bool fl = hlo::is_float(x.element());
  bool has_dim = ctx.has("dim");
  if (!has_dim) {
    TORCH_CHECK(self.numel() > 0, "median() operation does not have an identity for empty input tensor");
    int64_t n = self.numel();
    Value flat = hlo::reshape(x, {n});
    Value sorted = sort_with_indices(flat, 0, false).first;
    if (!fl) return {hlo::reshape(hlo::slice(sorted, {(n - 1) / 2}, {(n - 1) / 2 + 1}), {})};
    Value nan = is_nan(flat);
    if (!ignore_nan) {
      Value m = hlo::reshape(hlo::slice(sorted, {(n - 1) / 2}, {(n - 1) / 2 + 1}), {});
      Value any = hlo::reduce(nan, {0}, hlo::ReduceKind::kOr);
      return {hlo::select(any, hlo::constant(b, x.element(), NAN), m)};
    }
    Value cnt = hlo::sub(hlo::constant_int(b, ElementType::kI64, n),
                         hlo::reduce(hlo::convert(nan, ElementType::kI64), {0}, hlo::ReduceKind::kSum));
    // (cnt - 1) / 2 rounded toward zero: 0 when every value is NaN.
    Value k = hlo::binary("divide", hlo::max(hlo::sub(cnt, hlo::constant_int(b, ElementType::kI64, 1)),
                                             hlo::constant_int(b, ElementType::kI64, 0)),
                          hlo::constant_int(b, ElementType::kI64, 2));
    return {hlo::reshape(hlo::dynamic_slice(sorted, {k}, {1}), {})};
  }
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  bool keep = ctx.bool_arg("keepdim");
  int64_t n = dim_size(self, dim);
  TORCH_CHECK_INDEX(n > 0, "median() cannot compute median for a dimension of size 0 because the operation does not "
                    "have an identity");
  if (x.rank() == 0) return {x, hlo::constant_int(b, ElementType::kI64, 0)};
  auto [v, i] = sort_with_indices(x, dim, false);
  if (!fl) {
    int64_t k = (n - 1) / 2;
    return {squeeze_unless(at_index(v, dim, k), dim, keep), squeeze_unless(at_index(i, dim, k), dim, keep)};
  }
  Dims in_dims = x.dims();
  Value vl = sortscan::move_to_last(v, dim), il = sortscan::move_to_last(i, dim);
  Value nan = is_nan(sortscan::move_to_last(x, dim));
  int64_t last = vl.rank() - 1;
  Value nan_cnt = hlo::reduce(hlo::convert(nan, ElementType::kI64), {last}, hlo::ReduceKind::kSum);
  Value k;
  if (ignore_nan) {
    Value cnt = hlo::sub(hlo::full_like(nan_cnt, static_cast<double>(n)), nan_cnt);
    k = hlo::div(hlo::max(hlo::sub(cnt, hlo::full_like(cnt, 1)), hlo::zeros_like(cnt)), hlo::full_like(cnt, 2));
  } else {
    k = hlo::full_like(nan_cnt, static_cast<double>((n - 1) / 2));
  }
  Value val = take_last(vl, k), idx = take_last(il, k);
  if (!ignore_nan) {
    // First NaN of the row, when there is one.
    Value pos = hlo::iota(b, ElementType::kI64, nan.dims(), last);
    Value first_nan =
        hlo::reduce(hlo::select(nan, pos, hlo::full_like(pos, static_cast<double>(n))), {last}, hlo::ReduceKind::kMin);
    Value any = hlo::compare(nan_cnt, hlo::zeros_like(nan_cnt), "GT");
    val = hlo::select(any, hlo::full_like(val, NAN), val);
    idx = hlo::select(any, first_nan, idx);
  }
  Dims out_dims = in_dims;
  out_dims[dim] = 1;
  val = hlo::reshape(val, out_dims);
  idx = hlo::reshape(idx, out_dims);
  return {squeeze_unless(val, dim, keep), squeeze_unless(idx, dim, keep)};
}

}  // namespace

TPU_LOWERING(median) { return median_impl(ctx, false); }
TPU_LOWERING(nanmedian) { return median_impl(ctx, true); }

// ---- mode ----------------------------------------------------------------------------

// Most frequent value along dim; among equally frequent values the smallest,
// with the index of its last occurrence (PyTorch CPU).
TPU_LOWERING(mode) {
  Value x = ctx.tensor("self");
  const at::Tensor& self = ctx.tensor_arg("self");
  Builder& b = ctx.b();
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  bool keep = ctx.bool_arg("keepdim");
  if (x.rank() == 0) return {x, hlo::constant_int(b, ElementType::kI64, 0)};
  int64_t n = self.size(dim);
  TORCH_CHECK_INDEX(self.numel() == 0 || n > 0, "mode(): Expected reduction dim ", dim, " to have non-zero size.");
  Dims out_dims = x.dims();
  out_dims[dim] = 1;
  if (self.numel() == 0) {
    Value v = hlo::full(b, x.element(), out_dims, 0);
    Value i = hlo::full(b, ElementType::kI64, out_dims, 0);
    return {squeeze_unless(v, dim, keep), squeeze_unless(i, dim, keep)};
  }
  auto [sv, si] = sort_with_indices(x, dim, false);
  Value v = sortscan::move_to_last(sv, dim), idx = sortscan::move_to_last(si, dim);
  int64_t last = v.rank() - 1;
  Dims rows = v.dims();
  // Run boundaries of the sorted row: start[i] (v[i] != v[i-1]), end[i] (v[i] != v[i+1]).
  Dims s0(v.rank(), 0), lim = v.dims();
  Value start, end;
  Value t = hlo::full(b, ElementType::kPred, {}, 1);
  if (n > 1) {
    Dims lo(v.rank(), 0), hi(v.rank(), 0);
    Dims lim1 = lim;
    lim1[last] = n - 1;
    Dims s1(v.rank(), 0);
    s1[last] = 1;
    Value ne = hlo::compare(hlo::slice(v, s1, lim), hlo::slice(v, s0, lim1), "NE");  // v[i+1] != v[i], n-1 long
    lo[last] = 1;
    start = hlo::pad(ne, t, lo, hi);
    lo[last] = 0;
    hi[last] = 1;
    end = hlo::pad(ne, t, lo, hi);
  } else {
    start = end = hlo::full(b, ElementType::kPred, rows, 1);
  }
  Value pos = hlo::iota(b, ElementType::kI64, rows, last);
  // Start position of each element's run: running max of (start ? pos : 0).
  Value run_start = sortscan::scan({hlo::select(start, pos, hlo::zeros_like(pos))}, last,
                                   {hlo::constant_int(b, ElementType::kI64, 0)},
                                   [](const std::vector<Value>& a, const std::vector<Value>& c) {
                                     return std::vector<Value>{hlo::max(a[0], c[0])};
                                   })[0];
  Value freq = hlo::add(hlo::sub(pos, run_start), hlo::full_like(pos, 1));
  freq = hlo::select(end, freq, hlo::zeros_like(freq));
  // First position with the largest frequency.
  auto best = hlo::reduce_multi(
      {freq, pos}, {hlo::constant_int(b, ElementType::kI64, -1), hlo::constant_int(b, ElementType::kI64, 0)}, {last},
      [](Builder&, const std::vector<Value>& a) {
        Value gt = hlo::compare(a[0], a[2], "GT");
        Value eq = hlo::compare(a[0], a[2], "EQ");
        Value pick = hlo::binary("or", gt, hlo::binary("and", eq, hlo::compare(a[1], a[3], "LT")));
        return std::vector<Value>{hlo::select(pick, a[0], a[2]), hlo::select(pick, a[1], a[3])};
      });
  Value k = best[1];
  // Stable sort: the run's last element carries its largest input index.
  Value val = hlo::reshape(take_last(v, k), out_dims);
  Value ind = hlo::reshape(take_last(idx, k), out_dims);
  return {squeeze_unless(val, dim, keep), squeeze_unless(ind, dim, keep)};
}

// ---- searchsorted / bucketize -------------------------------------------------------

namespace {

// Binary search of every element of `vals` ([..., k] matching `seq`'s
// leading dims [..., m], or any shape when `seq` is 1-D) in the rows of
// `seq`, exactly as PyTorch CPU's lower/upper bound loop does (so NaN
// behaves the same). `sorter` optionally permutes each row.
Value search(Builder& b, Value seq, Value vals, bool right, Value sorter) {
  int64_t m = seq.dims().back();
  Dims out_dims = vals.dims();
  int64_t total = vals.type().numel();
  if (m == 0 || total == 0) return hlo::full(b, ElementType::kI64, out_dims, 0);
  // Row offset (into flattened seq) of each value.
  Value flat_seq = hlo::reshape(seq, {seq.type().numel()});
  Value offset;
  if (seq.rank() == 1) {
    offset = hlo::full(b, ElementType::kI64, out_dims, 0);
  } else {
    Dims lead(out_dims.begin(), out_dims.end() - 1);
    int64_t rows = 1;
    for (auto d : lead) rows *= d;
    Value r = hlo::iota(b, ElementType::kI64, {rows, out_dims.back()}, 0);
    offset = hlo::reshape(hlo::mul(r, hlo::full_like(r, static_cast<double>(m))), out_dims);
  }
  Value flat_sorter;
  if (sorter.valid()) flat_sorter = hlo::reshape(hlo::convert(sorter, ElementType::kI64), {sorter.type().numel()});
  Value start = hlo::full(b, ElementType::kI64, out_dims, 0);
  Value end = hlo::full(b, ElementType::kI64, out_dims, static_cast<double>(m));
  Value one = hlo::full(b, ElementType::kI64, out_dims, 1);
  int steps = 0;
  for (int64_t s = m; s > 0; s >>= 1) ++steps;
  for (int it = 0; it < steps; ++it) {
    Value active = hlo::compare(start, end, "LT");
    Value mid = hlo::add(start, hlo::binary("shift_right_arithmetic", hlo::sub(end, start), one));
    Value midc = hlo::clamp(hlo::constant_int(b, ElementType::kI64, 0), mid, hlo::constant_int(b, ElementType::kI64, m - 1));
    Value at = hlo::add(offset, midc);
    if (flat_sorter.valid()) at = hlo::add(offset, hlo::gather_1d(flat_sorter, at));
    Value mv = hlo::gather_1d(flat_seq, at);
    // lower bound: !(mid_val >= val) -> go right; upper bound: !(mid_val > val).
    Value go_right = hlo::unary("not", hlo::compare(mv, vals, right ? "GT" : "GE"));
    start = hlo::select(hlo::binary("and", active, go_right), hlo::add(mid, one), start);
    end = hlo::select(hlo::binary("and", active, hlo::unary("not", go_right)), mid, end);
  }
  return start;
}

}  // namespace

TPU_LOWERING(searchsorted) {
  auto t = ctx.result_type({"sorted_sequence", "self"});
  Value seq = hlo::convert(ctx.tensor("sorted_sequence"), element_type(t));
  Value vals = ctx.operand("self", t);
  bool right = ctx.bool_arg("right");
  if (!ctx.is_none("side")) right = ctx.str_arg("side") == "right";
  Value sorter;
  if (!ctx.is_none("sorter")) {
    sorter = ctx.tensor("sorter");
    // CPU refuses a sorter entry outside the row; the gather would clamp it.
    int64_t m = seq.dims().back();
    if (sorter.type().numel() > 0) {
      Value s64 = hlo::convert(sorter, ElementType::kI64);
      Value bad = hlo::binary("or", hlo::compare(s64, hlo::zeros_like(s64), "LT"),
                              hlo::compare(s64, hlo::full_like(s64, static_cast<double>(m)), "GE"));
      add_check(ctx, bad, s64, CheckKind::kIndexBounds, seq.rank() - 1, m, CheckError::kRuntime);
    }
  }
  return {search(ctx.b(), seq, vals, right, sorter)};
}

TPU_LOWERING(bucketize) {
  int64_t bd = ctx.tensor_arg("boundaries").dim();
  TORCH_CHECK(bd == 1, "boundaries tensor must be 1 dimension, but got dim(", bd, ")");
  auto t = ctx.result_type({"self", "boundaries"});
  Value seq = hlo::convert(ctx.tensor("boundaries"), element_type(t));
  Value vals = ctx.operand("self", t);
  return {search(ctx.b(), seq, vals, ctx.bool_arg("right"), Value())};
}

// ---- histc ---------------------------------------------------------------------------

namespace {

// Integer input, which CPU refuses and CUDA accepts (Transformers' MoE
// experts path calls histc on integer expert ids off CPU): CUDA's kernel, all
// in int64 — min/max truncated to integers, bin = (x - min) * bins / (max - min)
// by integer division, the last edge in the last bin; counts in the input dtype.
std::vector<Value> histc_integral(Builder& b, Value x, Value lo, Value hi, int64_t bins) {
  const ElementType i64 = ElementType::kI64;
  int64_t n = x.type().numel();
  if (n == 0) return {hlo::full(b, x.element(), {bins}, 0)};
  Value flat = hlo::convert(hlo::reshape(x, {n}), i64);
  lo = hlo::convert(lo, i64);
  hi = hlo::convert(hi, i64);
  Value same = hlo::compare(lo, hi, "EQ");
  lo = hlo::select(same, hlo::reduce(flat, {0}, hlo::ReduceKind::kMin), lo);
  hi = hlo::select(same, hlo::reduce(flat, {0}, hlo::ReduceKind::kMax), hi);
  same = hlo::compare(lo, hi, "EQ");
  lo = hlo::select(same, hlo::sub(lo, hlo::constant_int(b, i64, 1)), lo);
  hi = hlo::select(same, hlo::add(hi, hlo::constant_int(b, i64, 1)), hi);
  Value l = hlo::broadcast_in_dim(lo, {n}, {}), r = hlo::broadcast_in_dim(hi, {n}, {});
  Value inside = hlo::binary("and", hlo::compare(flat, l, "GE"), hlo::compare(flat, r, "LE"));
  Value nb = hlo::full_like(flat, static_cast<double>(bins));
  Value pos = hlo::div(hlo::mul(hlo::sub(flat, l), nb), hlo::sub(r, l));
  pos = hlo::select(hlo::compare(pos, nb, "EQ"), hlo::sub(nb, hlo::full_like(pos, 1)), pos);
  pos = hlo::select(inside, pos, nb);  // out of range: a spare bin, cut off
  Value counts = hlo::scatter_1d(hlo::full(b, i64, {bins + 1}, 0), pos, hlo::full(b, i64, {n}, 1), "add");
  return {hlo::convert(hlo::slice(counts, {0}, {bins}), x.element())};
}

}  // namespace

// Fixed-width bins over [min, max] (the data's range when min == max),
// computed in the input dtype like PyTorch CPU's linear-interpolation kernel.
TPU_LOWERING(histc) {
  Value x = ctx.tensor("self");
  auto dt = ctx.dtype_of("self");
  TORCH_CHECK(at::isFloatingType(dt) || at::isIntegralType(dt, /*includeBool=*/false),
              "torch.histc: input tensor must be floating point or integer, but got ", dt);
  int64_t bins = ctx.int_arg("bins");
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dim 0");
  Builder& b = ctx.b();
  ElementType e = x.element();
  // Edges in double precision first (like CPU), then rounded to the dtype.
  ElementType de = ElementType::kF64;
  Value lo = ctx.operand("min", at::kDouble), hi = ctx.operand("max", at::kDouble);
  {
    double mn = ctx.arg("min").toScalar().toDouble(), mx = ctx.arg("max").toScalar().toDouble();
    TORCH_CHECK(!(std::isinf(mn) || std::isinf(mx) || std::isnan(mn) || std::isnan(mx)),
                "torch.histc: range of [", mn, ", ", mx, "] is not finite");
    TORCH_CHECK(mn <= mx, "torch.histc: max must be larger than min");
  }
  if (!at::isFloatingType(dt)) return histc_integral(b, x, lo, hi, bins);
  int64_t n = x.type().numel();
  Value flat = hlo::reshape(x, {n});
  if (n > 0) {
    Value same = hlo::compare(lo, hi, "EQ");
    Value dmin = hlo::convert(hlo::reduce(flat, {0}, hlo::ReduceKind::kMin), de);
    Value dmax = hlo::convert(hlo::reduce(flat, {0}, hlo::ReduceKind::kMax), de);
    // CPU's (and CUDA's) check of the range taken from the data: an inf or
    // NaN in it counted nothing where it should raise
    check_data(ctx, hlo::binary("and", same, hlo::binary("or", ew::not_finite(dmin), ew::not_finite(dmax))),
               "torch.histc: range of [min, max] of the input is not finite (it holds inf or NaN)");
    lo = hlo::select(same, dmin, lo);
    hi = hlo::select(same, dmax, hi);
  }
  Value same = hlo::compare(lo, hi, "EQ");
  lo = hlo::select(same, hlo::sub(lo, hlo::constant(b, de, 1)), lo);
  hi = hlo::select(same, hlo::add(hi, hlo::constant(b, de, 1)), hi);
  Value left = hlo::convert(lo, e), rightv = hlo::convert(hi, e);
  if (n == 0) return {hlo::full(b, e, {bins}, 0)};
  Value l = hlo::broadcast_in_dim(left, {n}, {}), r = hlo::broadcast_in_dim(rightv, {n}, {});
  Value inside = hlo::binary("and", hlo::compare(flat, l, "GE"), hlo::compare(flat, r, "LE"));
  Value pos_f = hlo::div(hlo::mul(hlo::sub(flat, l), hlo::full_like(flat, static_cast<double>(bins))), hlo::sub(r, l));
  Value pos = hlo::convert(pos_f, ElementType::kI64);
  Value nb = hlo::full_like(pos, static_cast<double>(bins));
  pos = hlo::select(hlo::compare(pos, nb, "EQ"), hlo::sub(nb, hlo::full_like(pos, 1)), pos);
  // Out-of-range elements (and NaNs) go to a spare bin that is cut off.
  pos = hlo::select(inside, hlo::clamp(hlo::constant_int(b, ElementType::kI64, 0), pos,
                                       hlo::constant_int(b, ElementType::kI64, bins - 1)),
                    nb);
  ElementType acc = e == ElementType::kF64 ? e : ElementType::kF32;
  Value counts = hlo::scatter_1d(hlo::full(b, acc, {bins + 1}, 0), pos, hlo::full(b, acc, {n}, 1), "add");
  return {hlo::slice(counts, {0}, {bins})};
}

}  // namespace torch_tpu::lowering
