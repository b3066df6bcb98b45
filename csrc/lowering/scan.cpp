// Scans: cummax / cummin (values and indices; cummax itself is composite
// over _cummax_helper), logcumsumexp (composite over _logcumsumexp; complex
// inputs as a sequential loop in CPU's order).
//
// StableHLO has no scan op: an inclusive scan is log2(n) doubling steps
// (Hillis-Steele), each combining the running value with itself shifted by
// 2^k along the dim (the shift pads with the combine's identity).
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <cmath>

#include "hlo/complex_ops.h"
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
  Value id_v = is_max ? hlo::lowest(b, e) : hlo::highest(b, e);
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

namespace {

Value nan_c(Value z) { return hlo::binary("or", is_nan(hlo::real(z)), is_nan(hlo::imag(z))); }

// CPU's complex logaddexp of x and the running value y: min / max by real
// part (NaNs win, y first), log1p(exp(min - max)) + max, with CPU's special
// cases for NaN and equal infinite real parts.
Value log_add_exp_c(Value x, Value y) {
  Value xr = hlo::real(x), yr = hlo::real(y);
  Value yn = nan_c(y), xn = nan_c(x);
  Value mn = hlo::select(yn, y, hlo::select(xn, x, hlo::select(hlo::compare(xr, yr, "LT"), x, y)));
  Value mx = hlo::select(yn, y, hlo::select(xn, x, hlo::select(hlo::compare(xr, yr, "GE"), x, y)));
  Value mnr = hlo::real(mn), mxr = hlo::real(mx);
  Value r = hlo::add(hlo::unary("log_plus_one", hlo::unary("exponential", hlo::sub(mn, mx))), mx);
  Value inf_eq = hlo::binary("and", hlo::compare(hlo::unary("abs", mnr), hlo::full_like(mnr, INFINITY), "EQ"),
                             hlo::compare(mnr, mxr, "EQ"));
  Value both = hlo::unary("log", hlo::add(hlo::unary("exponential", mn), hlo::unary("exponential", mx)));
  Value neg = hlo::compare(mnr, hlo::zeros_like(mnr), "LT");
  r = hlo::select(inf_eq, hlo::select(neg, mn, both), r);
  Value nanv = hlo::make_complex(hlo::full_like(mnr, NAN), hlo::full_like(mnr, NAN));
  return hlo::select(nan_c(mn), nanv, r);
}

// Complex logcumsumexp, one element along `dim` per while step in CPU's
// order: a complex result's imaginary part depends on the combine order
// (it is not reduced modulo 2 pi), so a doubling scan could differ from CPU
// by multiples of 2 pi.
Value logcumsumexp_complex(Value x, int64_t dim) {
  Builder& b = x.builder();
  int64_t r = x.rank(), n = x.dim(dim);
  Dims perm{dim};
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) perm.push_back(i);
  Value xt = hlo::transpose(x, perm);
  Dims rest(xt.dims().begin() + 1, xt.dims().end()), one = xt.dims();
  one[0] = 1;
  Value run0 = hlo::make_complex(hlo::full(b, hlo::complex_component(x.element()), rest, -INFINITY),
                                 hlo::full(b, hlo::complex_component(x.element()), rest, 0));
  auto i64 = [&](int64_t v) { return hlo::constant_int(b, ElementType::kI64, v); };
  auto out = hlo::while_loop(
      {i64(0), run0, hlo::zeros_like(xt), xt}, [&](const std::vector<Value>& s) { return hlo::compare(s[0], i64(n), "LT"); },
      [&](const std::vector<Value>& s) {
        Value i = s[0], run = s[1], acc = s[2], src = s[3];
        std::vector<Value> starts{i};
        for (size_t k = 1; k < one.size(); ++k) starts.push_back(i64(0));
        Value xi = hlo::reshape(hlo::dynamic_slice(src, starts, one), rest);
        Value nxt = log_add_exp_c(xi, run);
        acc = hlo::dynamic_update_slice(acc, hlo::reshape(nxt, one), starts);
        return std::vector<Value>{hlo::add(i, i64(1)), nxt, acc, src};
      });
  Dims inv(r);
  for (int64_t i = 0; i < r; ++i) inv[perm[i]] = i;
  return hlo::transpose(out[2], inv);
}

}  // namespace

// log(cumsum(exp(x))) without overflow: each combine is a stable logaddexp,
// in float32 for reduced-precision inputs (PyTorch's accumulate type).
// Complex inputs: logcumsumexp_complex.
TPU_LOWERING(logcumsumexp) {
  Value x = ctx.tensor("self");
  Builder& b = ctx.b();
  // _logcumsumexp has no meta kernel: the result has the input's dtype.
  auto out = ctx.out_dtype(0).value_or(ctx.dtype_of("self"));
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), x.rank());
  ElementType e = (out == at::kBFloat16 || out == at::kHalf) ? ElementType::kF32 : element_type(out);
  TORCH_CHECK(hlo::is_float(e) || hlo::is_complex(e),
              "logcumsumexp(): expected a floating point or complex output dtype, got ", out);
  x = hlo::convert(x, e);
  if (x.rank() == 0 || x.type().numel() == 0) return {hlo::convert(x, element_type(out))};
  if (hlo::is_complex(e)) return {logcumsumexp_complex(x, dim)};
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
