// Orthogonal polynomials special_*_polynomial_*(x, n): x and n are tensors or
// Scalars, promoted together; n is truncated to an integer like PyTorch's
// static_cast<int64_t>(n). CPU runs the three-term recurrences up to n.
// Chebyshev polynomials unroll them to a fixed bound and switch to their
// closed forms beyond it (and inside (-1, 1) for large n, as CPU does);
// Hermite (NaN beyond CPU's limit: 128 for float, 512 for double),
// Laguerre and Legendre run theirs as a stablehlo.while to each element's
// n (they were unrolled to 64 or 128 steps: P_100(0.5) came out as P_65).
#include "lowering/special_util.h"

namespace torch_tpu::lowering {

using namespace sp;

namespace {

constexpr int kChebUnroll = 32;
constexpr int kHermiteLimitFloat = 128;
constexpr int kHermiteLimitDouble = 512;
// Steps of a while-loop recurrence: n up to 2^26 (CPU's loop for larger n
// takes as long per element; an element still going after them is NaN).
constexpr int64_t kMaxSteps = int64_t{1} << 26;

struct XN {
  Value x, n;  // n: truncated, in x's type
};

XN poly_args(LowerCtx& ctx) {
  auto dims = out_dims(ctx, {"x", "n"});
  auto t = compute_type(ctx, {"x", "n"});
  Value x = in(ctx, "x", t, dims);
  Value n = ew::trunc(in(ctx, "n", t, dims));
  // NaN, inf and n outside int64 convert to INT64_MIN on (x86) CPU, i.e. a
  // negative degree.
  n = sel(lt(fabs(n), 9.2233720368547758e18), n, K(n, -1.0));
  return {x, n};
}

Value is_even(Value n) { return eq(n - 2.0 * floor(n / 2.0), 0.0); }

// Runs q <- step(k, p, q), p <- q for k = first, first + 1, ... while
// k <= n + offset (per element), at most `count` steps, unrolled.
template <typename F>
Value recur(Value n, Value p, Value q, int first, int count, double offset, F step) {
  for (int k = first; k < first + count; ++k) {
    Value go = le(K(n, static_cast<double>(k)), n + offset);
    Value r = step(static_cast<double>(k), p, q);
    p = sel(go, q, p);
    q = sel(go, r, q);
  }
  return q;
}

// The same recurrence from k = 1 while k <= n - 1, as CPU's loop: a
// stablehlo.while until every element not in `skip` has taken its steps
// (or turned NaN, where CPU's Laguerre and Legendre loops stop too).
// `step(k, x, p, q)` gets the loop's own copies of x and k.
template <typename F>
Value recur_to_n(Value n, Value x, Value p, Value q, Value skip, F step) {
  skip = or_(skip, lt(n, 2.0));
  auto st = until_done({n, x, K(n, 1.0), p, q}, skip, kMaxSteps, [&](const std::vector<Value>& v) {
    Value k = v[2], r = step(k, v[1], v[3], v[4]), k2 = k + 1.0;
    return std::pair{std::vector<Value>{v[0], v[1], k2, v[4], r}, or_(gt(k2, v[0] - 1.0), ew::is_nan(r))};
  });
  return sel(st[5], st[4], K(q, kNaN));
}

enum class Cheb { T, U, V, W };

// Chebyshev polynomial of `kind` at y (y = x, or 2x - 1 for the shifted
// ones); `trig_from`: the n above which |y| < 1 uses the trigonometric form.
Value chebyshev(Cheb kind, Value y, Value n, int trig_from) {
  Value two_y = y + y;
  Value p1 = kind == Cheb::T ? y : kind == Cheb::U ? two_y : kind == Cheb::V ? two_y - 1.0 : two_y + 1.0;
  Value rec = recur(n, K(y, 1.0), p1, 2, kChebUnroll - 1, 0.0,
                    [&](double, Value p, Value q) { return two_y * q - p; });
  rec = sel(eq(n, 0.0), 1.0, rec);
  Value even = is_even(n);
  Value twon1 = n + n + 1.0;
  // |y| < 1 and n large: y = cos(theta).
  Value th = acos(y);
  Value trig;
  switch (kind) {
    case Cheb::T: trig = cos(n * th); break;
    case Cheb::U: {
      Value s = sin(th);
      trig = sel(ne(s, 0.0), sin((n + 1.0) * th) / s, (n + 1.0) * cos((n + 1.0) * th) / y);
      break;
    }
    case Cheb::V:
      trig = sel(ne(sin(th / 2.0), 1.0), cos((n + 0.5) * th) / cos(th / 2.0), sel(even, twon1, -twon1));
      break;
    case Cheb::W:
      trig = sel(ne(cos(th / 2.0), 1.0), sin((n + 0.5) * th) / sin(th / 2.0),
                 sel(gt(y, 0.0), twon1, sel(even, K(y, 1.0), K(y, -1.0))));
      break;
  }
  // |y| > 1 and n beyond the unrolled steps: y = +-cosh(t).
  Value a = fabs(y);
  Value t = log(a + sqrt((a - 1.0) * (a + 1.0)));
  Value sgn = sel(and_(lt(y, 0.0), not_(even)), K(y, -1.0), K(y, 1.0));
  Value hyp;
  auto cosh = [](Value v) { return 0.5 * (exp(v) + exp(-v)); };
  auto sinh = [](Value v) { return 0.5 * (exp(v) - exp(-v)); };
  switch (kind) {
    case Cheb::T: hyp = sgn * cosh(n * t); break;
    case Cheb::U: hyp = sgn * sinh((n + 1.0) * t) / sinh(t); break;
    case Cheb::V:
    case Cheb::W: {
      Value vpos = cosh((n + 0.5) * t) / cosh(t / 2.0), wpos = sinh((n + 0.5) * t) / sinh(t / 2.0);
      Value neg = lt(y, 0.0);
      hyp = kind == Cheb::V ? sel(neg, sgn * wpos, vpos) : sel(neg, sgn * vpos, wpos);
      break;
    }
  }
  Value out = sel(gt(n, static_cast<double>(kChebUnroll)), hyp, rec);
  out = sel(and_(gt(n, static_cast<double>(trig_from)), lt(a, 1.0)), trig, out);
  // |y| == 1.
  Value pos = gt(y, 0.0);
  Value at1;
  switch (kind) {
    case Cheb::T: at1 = sel(or_(pos, even), K(y, 1.0), K(y, -1.0)); break;
    case Cheb::U: at1 = sel(or_(pos, even), n + 1.0, -(n + 1.0)); break;
    case Cheb::V: at1 = sel(pos, K(y, 1.0), sel(even, twon1, -twon1)); break;
    case Cheb::W: at1 = sel(pos, twon1, sel(even, K(y, 1.0), K(y, -1.0))); break;
  }
  out = sel(eq(a, 1.0), at1, out);
  return sel(lt(n, 0.0), 0.0, out);
}

}  // namespace

#define TPU_CHEBYSHEV(name, kind, shifted, trig_from)            \
  TPU_LOWERING(name) {                                           \
    auto [x, n] = poly_args(ctx);                                \
    Value y = shifted ? x + x - 1.0 : x;                         \
    return {chebyshev(Cheb::kind, y, n, trig_from)};             \
  }

TPU_CHEBYSHEV(special_chebyshev_polynomial_t, T, false, 6)
TPU_CHEBYSHEV(special_chebyshev_polynomial_u, U, false, 8)
TPU_CHEBYSHEV(special_chebyshev_polynomial_v, V, false, 8)
TPU_CHEBYSHEV(special_chebyshev_polynomial_w, W, false, 8)
TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_t, T, true, 6)
TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_u, U, true, 6)
TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_v, V, true, 6)
TPU_CHEBYSHEV(special_shifted_chebyshev_polynomial_w, W, true, 4)

// H_n: H_{k+1} = 2x H_k - 2k H_{k-1}.
TPU_LOWERING(special_hermite_polynomial_h) {
  auto [x, n] = poly_args(ctx);
  Value two_x = x + x;
  int limit = x.element() == ElementType::kF64 ? kHermiteLimitDouble : kHermiteLimitFloat;
  Value over = gt(n, static_cast<double>(limit));
  Value r = recur_to_n(n, x, K(x, 1.0), two_x, over,
                       [](Value k, Value xx, Value p, Value q) { return (xx + xx) * q - (2.0 * k) * p; });
  r = sel(eq(n, 0.0), 1.0, r);
  r = sel(over, kNaN, r);
  return {sel(lt(n, 0.0), 0.0, r)};
}

// He_n: He_{k+1} = x He_k - k He_{k-1}.
TPU_LOWERING(special_hermite_polynomial_he) {
  auto [x, n] = poly_args(ctx);
  int limit = x.element() == ElementType::kF64 ? kHermiteLimitDouble : kHermiteLimitFloat;
  Value over = gt(n, static_cast<double>(limit));
  Value r = recur_to_n(n, x, K(x, 1.0), x, over, [](Value k, Value xx, Value p, Value q) { return xx * q - k * p; });
  r = sel(eq(n, 0.0), 1.0, r);
  r = sel(over, kNaN, r);
  return {sel(lt(n, 0.0), 0.0, r)};
}

// L_n: L_{k+1} = ((2k + 1 - x) L_k - k L_{k-1}) / (k + 1).
TPU_LOWERING(special_laguerre_polynomial_l) {
  auto [x, n] = poly_args(ctx);
  Value r = recur_to_n(n, x, K(x, 1.0), 1.0 - x, eq(x, 0.0), [](Value k, Value xx, Value p, Value q) {
    return ((k + k + (1.0 - xx)) * q - k * p) / (k + 1.0);
  });
  r = sel(eq(n, 0.0), 1.0, r);
  r = sel(eq(x, 0.0), 1.0, r);
  return {sel(lt(n, 0.0), 0.0, r)};
}

// P_n: P_{k+1} = ((2k + 1) x P_k - k P_{k-1}) / (k + 1).
TPU_LOWERING(special_legendre_polynomial_p) {
  auto [x, n] = poly_args(ctx);
  Value at1 = eq(fabs(x), 1.0);
  Value r = recur_to_n(n, x, K(x, 1.0), x, at1, [](Value k, Value xx, Value p, Value q) {
    return ((k + k + 1.0) * xx * q - k * p) / (k + 1.0);
  });
  r = sel(eq(n, 0.0), 1.0, r);
  r = sel(at1, sel(or_(gt(x, 0.0), is_even(n)), K(x, 1.0), K(x, -1.0)), r);
  return {sel(lt(n, 0.0), 0.0, r)};
}

}  // namespace torch_tpu::lowering
