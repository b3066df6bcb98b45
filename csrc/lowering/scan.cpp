// Scans: cummax / cummin (values and indices; cummax itself is composite
// over _cummax_helper), logcumsumexp (composite over _logcumsumexp).
//
// StableHLO has no scan op: an inclusive scan is log2(n) doubling steps
// (Hillis-Steele), each combining the running value with itself shifted by
// 2^k along the dim (the shift pads with the combine's identity).
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

#include "lowering/sort_scan.h"

namespace torch_tpu::lowering {

namespace sortscan {

std::vector<Value> scan(std::vector<Value> xs, int64_t dim, const std::vector<Value>& ids, const Combine& combine) {
  if (xs[0].rank() == 0) return xs;
  int64_t n = xs[0].dim(dim), r = xs[0].rank();
  for (int64_t s = 1; s < n; s *= 2) {
    Dims start(r, 0), limit = xs[0].dims(), low(r, 0), high(r, 0);
    limit[dim] = n - s;
    low[dim] = s;
    std::vector<Value> shifted;
    for (size_t i = 0; i < xs.size(); ++i) shifted.push_back(hlo::pad(hlo::slice(xs[i], start, limit), ids[i], low, high));
    xs = combine(shifted, xs);
  }
  return xs;
}

}  // namespace sortscan

namespace {

Value is_nan(Value x) { return hlo::compare(x, x, "NE"); }

// cummax / cummin: PyTorch CPU takes x[i] when it is NaN, or when the
// running value is not NaN and x[i] >= (<=) it, so ties and NaNs resolve to
// the LAST index. As a combine, that picks the later element unless the
// earlier one is strictly better or is a NaN the later one is not.
std::vector<Value> cum_extreme(LowerCtx& ctx, bool is_max) {
  Value x = ctx.tensor("self");
  Builder& b = ctx.b();
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  if (x.rank() == 0 || x.type().numel() == 0)
    return {x, hlo::full(b, ElementType::kI64, x.dims(), 0)};
  ElementType orig = x.element();
  if (orig == ElementType::kPred) x = hlo::convert(x, ElementType::kI32);
  ElementType e = x.element();
  bool fl = hlo::is_float(e);
  Value id_v;
  if (fl) {
    id_v = hlo::constant(b, e, is_max ? -INFINITY : INFINITY);
  } else if (e == ElementType::kI64) {
    id_v = hlo::constant_int(b, e, is_max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
  } else if (hlo::is_unsigned_int(e)) {
    id_v = is_max ? hlo::constant_int(b, e, 0) : hlo::constant(b, e, std::ldexp(1.0, hlo::element_bits(e)) - 1);
  } else {
    int64_t half = int64_t(1) << (hlo::element_bits(e) - 1);
    id_v = hlo::constant_int(b, e, is_max ? -half : half - 1);
  }
  Value idx = hlo::iota(b, ElementType::kI64, x.dims(), dim);
  auto res = sortscan::scan(
      {x, idx}, dim, {id_v, hlo::constant_int(b, ElementType::kI64, -1)},
      [is_max, fl](const std::vector<Value>& a, const std::vector<Value>& c) {
        Value av = a[0], cv = c[0];
        // Keep the earlier one (a) when it is strictly better than c.
        Value keep_a = hlo::compare(av, cv, is_max ? "GT" : "LT");
        if (fl) keep_a = hlo::binary("and", hlo::binary("or", keep_a, is_nan(av)), hlo::unary("not", is_nan(cv)));
        return std::vector<Value>{hlo::select(keep_a, av, cv), hlo::select(keep_a, a[1], c[1])};
      });
  Value v = res[0];
  if (orig == ElementType::kPred) v = hlo::convert(v, ElementType::kPred);
  return {v, res[1]};
}

}  // namespace

TPU_LOWERING(cummax) { return cum_extreme(ctx, true); }
TPU_LOWERING(cummin) { return cum_extreme(ctx, false); }
TPU_LOWERING_ALIAS(_cummax_helper, cummax);
TPU_LOWERING_ALIAS(_cummin_helper, cummin);

// log(cumsum(exp(x))) without overflow: each combine is a stable logaddexp,
// in float32 for reduced-precision inputs (PyTorch's accumulate type).
TPU_LOWERING(logcumsumexp) {
  Value x = ctx.tensor("self");
  Builder& b = ctx.b();
  // _logcumsumexp has no meta kernel: the result has the input's dtype.
  auto out = ctx.out_dtype(0).value_or(ctx.dtype_of("self"));
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  ElementType e = (out == at::kBFloat16 || out == at::kHalf) ? ElementType::kF32 : element_type(out);
  TORCH_CHECK(hlo::is_float(e), "logcumsumexp(): expected a floating point output dtype, got ", out);
  x = hlo::convert(x, e);
  if (x.rank() == 0 || x.type().numel() == 0) return {hlo::convert(x, element_type(out))};
  Value r = sortscan::scan({x}, dim, {hlo::constant(b, e, -INFINITY)},
                        [](const std::vector<Value>& a, const std::vector<Value>& c) {
                          Value p = a[0], q = c[0];
                          Value nan = hlo::binary("or", is_nan(p), is_nan(q));
                          Value mn = hlo::min(p, q), mx = hlo::max(p, q);
                          Value inf_eq = hlo::binary(
                              "and", hlo::compare(hlo::unary("abs", mn), hlo::full_like(mn, INFINITY), "EQ"),
                              hlo::compare(mn, mx, "EQ"));
                          Value r = hlo::add(mx, hlo::unary("log_plus_one", hlo::unary("exponential", hlo::sub(mn, mx))));
                          r = hlo::select(inf_eq, mx, r);
                          r = hlo::select(nan, hlo::add(p, q), r);
                          return std::vector<Value>{r};
                        })[0];
  return {hlo::convert(r, element_type(out))};
}
TPU_LOWERING_ALIAS(_logcumsumexp, logcumsumexp);

}  // namespace torch_tpu::lowering
