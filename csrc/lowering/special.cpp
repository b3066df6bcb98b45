// Special functions: gamma family (lgamma, digamma, polygamma, zeta), error
// function family (erfinv, erfcx, ndtri, log_ndtr), Bessel functions, and
// small ones (sinc, logit, entr, xlog1py). They follow the approximations
// PyTorch uses on CPU (Cephes, see special_coeffs.h) written as StableHLO:
// every branch is computed and the right one selected per element; loops
// with a data-dependent trip count are unrolled to a bound that covers them,
// or, where the count grows with the argument (the incomplete gamma's
// series for large a, zeta's direct sum for negative q), run as a
// stablehlo.while until every element meets its own test (until_done).
// bf16/f16 and integer inputs compute in float32, float64 in float64.
#include <iterator>

#include "lowering/special_coeffs.h"
#include "lowering/special_util.h"
#include "runtime/runtime.h"

namespace torch_tpu::lowering {

using namespace sp;
namespace sc = special_coeffs;

namespace {

Value signbit(Value x) {
  auto ie = x.element() == ElementType::kF64 ? ElementType::kI64 : ElementType::kI32;
  return hlo::compare(hlo::bitcast_convert(x, ie), hlo::full(x.builder(), ie, x.dims(), 0), "LT");
}

double machine_eps(Value x) {
  return x.element() == ElementType::kF64 ? std::numeric_limits<double>::epsilon()
                                          : std::numeric_limits<float>::epsilon();
}

// ---- gamma family -----------------------------------------------------------

// x minus its nearest integer, in [-1/2, 1/2] and exact: the argument of
// the reflection formulas' sin(pi x) and tan(pi x) (period 1 in x), which
// keeps the distance to a pole that pi * x would lose in f32.
Value reduced_to_half_period(Value x) { return x - hlo::unary("round_nearest_even", x); }

// log|Gamma(x)| by the Lanczos approximation (g = 7, 9 terms) with the
// reflection formula below 1/2.
Value lgamma(Value x) {
  static const double c[] = {0.99999999999980993,  676.5203681218851,     -1259.1392167224028,
                             771.32342877765313,   -176.61502916214059,   12.507343278686905,
                             -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7};
  Value refl = lt(x, 0.5);
  Value z = sel(refl, 1.0 - x, x) - 1.0;
  Value a = K(z, c[0]);
  for (int i = 1; i < 9; ++i) a = a + c[i] / (z + static_cast<double>(i));
  Value t = z + 7.5;
  Value lg = (0.5 * std::log(2 * kPi)) + (z + 0.5) * log(t) - t + log(a);
  Value lr = log(kPi / fabs(sin(kPi * reduced_to_half_period(x)))) - lg;
  Value out = sel(refl, lr, lg);
  return sel(eq(fabs(x), kInf), kInf, out);
}

Value digamma(Value x) {
  const double kPsi10 = 2.25175258906672110764;
  Value neg = lt(x, 0.0);
  Value tr = ew::trunc(x);
  Value is_int = eq(x, tr);
  // Reduced, not x - trunc(x): near a pole that is close to +-1, and pi
  // times it lost the distance (4% off at x = -2 + 1.2e-7).
  Value refl = kPi / tan(kPi * reduced_to_half_period(x));
  Value y = sel(neg, 1.0 - x, x);
  Value res = K(x, 0);
  for (int i = 0; i < 10; ++i) {
    Value small = lt(y, 10.0);
    res = sel(small, res - 1.0 / y, res);
    y = sel(small, y + 1.0, y);
  }
  Value z = 1.0 / (y * y);
  Value tail = sel(lt(y, 1e17), z * poly(z, sc::k_digamma_A), 0.0);
  Value out = res + log(y) - 0.5 / y - tail;
  out = sel(eq(y, 10.0), res + kPsi10, out);
  out = sel(neg, out - refl, out);
  out = sel(and_(neg, is_int), kNaN, out);
  Value zero_val = sel(signbit(x), K(x, kInf), K(x, -kInf));
  return sel(eq(x, 0.0), zero_val, out);
}

Value trigamma(Value x) {
  Value small = lt(x, 0.5);
  Value s = sin(kPi * x);
  Value res = sel(small, -(kPi * kPi) / (s * s), 0.0);
  Value y = sel(small, 1.0 - x, x);
  for (int i = 0; i < 6; ++i) {
    res = res + 1.0 / (y * y);
    y = y + 1.0;
  }
  Value ixx = 1.0 / (y * y);
  res = res + (1.0 + 1.0 / (2.0 * y) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / y;
  return sel(small, -res, res);
}

// float32 computed in float64 where CPU's kernels do (Math.h's acc_type),
// except on a TPU, which has no native float64.
ElementType cpu_accumulation(ElementType e) {
  return e == ElementType::kF32 && !runtime::get().platform().is_tpu() ? ElementType::kF64 : e;
}

// Hurwitz zeta(x, q) (Cephes, as PyTorch's Math.h): direct sum until the
// terms are negligible and a > 9, then Euler-Maclaurin. For q < 0 the
// direct sum runs about -q terms first; it is cut at 2^26 terms (q below
// about -6.7e7; a second or two of XLA:CPU's loop for a small tensor),
// which gives NaN rather than a partial sum (CPU's loop never ends where
// q + 1 == q). float32 is summed in float64 as on CPU:
// zeta(501, 501) underflows to 0 there and 501^24 does not overflow.
Value zeta(Value x_in, Value q_in) {
  const ElementType out_type = x_in.element();
  const ElementType wide = cpu_accumulation(out_type);
  Value x = hlo::convert(x_in, wide), q = hlo::convert(q_in, wide);
  const double kMachEp = 1.11022302462515654042E-16;
  Value q_nonpos = le(q, 0.0);
  Value special = or_(le(x, 1.0), and_(q_nonpos, or_(eq(q, floor(q)), ne(x, floor(x)))));
  Value s0 = pow(q, -x);
  // State: x, i, a, b, s, converged.
  auto direct = until_done({x, K(x, 0.0), q, K(q, 0.0), s0, falses(x.builder(), x)}, special, int64_t{1} << 26,
                           [&](const std::vector<Value>& st) {
                             Value xx = st[0], i = st[1] + 1.0, a = st[2] + 1.0;
                             Value b = pow(a, -xx), s = st[4] + b;
                             Value conv = and_(lt(-kMachEp * s, b), lt(b, kMachEp * s));
                             Value leave = and_(ge(i, 9.0), not_(le(a, 9.0)));  // NaN leaves, as on CPU
                             return std::pair{std::vector<Value>{xx, i, a, b, s, conv}, or_(conv, leave)};
                           });
  Value a = direct[2], b = direct[3], s = direct[4], converged = direct[5], finished = direct[6];
  Value w = a;
  Value s_em = s + b * w / (x - 1.0) - 0.5 * b;
  Value am = K(x, 1.0);
  Value k = K(x, 0.0);
  Value em_done = converged;
  for (int i = 0; i < 12; ++i) {
    am = am * (x + k);
    b = b / w;
    Value t = am * b / sc::k_zeta_A[i];
    Value s2 = s_em + t;
    s_em = sel(em_done, s_em, s2);
    em_done = or_(em_done, lt(fabs(t / s2), kMachEp));
    k = k + 1.0;
    am = am * (x + k);
    b = b / w;
    k = k + 1.0;
  }
  Value out = sel(converged, s, s_em);
  out = sel(not_(finished), kNaN, out);
  out = sel(and_(q_nonpos, ne(x, floor(x))), kNaN, out);
  out = sel(and_(q_nonpos, eq(q, floor(q))), kInf, out);
  out = sel(lt(x, 1.0), kNaN, out);
  return hlo::convert(sel(eq(x, 1.0), kInf, out), out_type);
}

Value polygamma(int64_t n, Value x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  double fact = std::exp(std::lgamma(static_cast<double>(n) + 1.0));
  return ((n % 2) ? fact : -fact) * zeta(K(x, static_cast<double>(n + 1)), x);
}

// ---- regularized incomplete gamma ----------------------------------------------
// PyTorch's calc_igamma / calc_igammac (SciPy's Cephes igam.c): Temme's
// uniform asymptotic expansion where a is large and x near it, else the
// power series, the continued fraction or the Q series, each run per
// element until its own convergence test (at most 2000 steps, as there).

double igam_eps(Value v) { return v.element() == ElementType::kF64 ? 1.11022302462515654042E-16 : 5.9604644775390625E-8; }
constexpr int64_t kIgamMaxIter = 2000;

// Boost's Lanczos sum scaled by exp(g) (Math.h's ratevl: in 1/x above 1,
// where the degree-12 polynomials would overflow).
Value lanczos_sum_expg_scaled(Value x) {
  auto horner = [&](Value y, const double* c, size_t n, bool reversed) {
    Value r = K(y, reversed ? c[n - 1] : c[0]);
    for (size_t i = 1; i < n; ++i) r = r * y + (reversed ? c[n - 1 - i] : c[i]);
    return r;
  };
  const double* num = sc::k_lanczos_expg_scaled_num;
  const double* den = sc::k_lanczos_expg_scaled_den;
  const size_t n = std::size(sc::k_lanczos_expg_scaled_num);
  Value small = horner(x, num, n, false) / horner(x, den, n, false);
  Value y = 1.0 / x;
  Value large = horner(y, num, n, true) / horner(y, den, n, true);
  return sel(gt(fabs(x), 1.0), large, small);
}

// x^a e^-x / Gamma(a). Near a = x the Lanczos form: a log x - x - lgamma(a)
// is a difference of numbers near a log a, whose rounding alone put
// igamma(13437.7, 13437.7) at 0.21 in float32 (0.5 on CPU).
Value igam_fac(Value a, Value x) {
  const double maxlog = a.element() == ElementType::kF64 ? 7.09782712893383996843E2 : 88.72283905206835;
  const double g = 6.024680040776729583740234375;
  Value ax = a * log(x) - x - lgamma(a);
  Value far = sel(lt(ax, -maxlog), 0.0, exp(ax));
  Value fac = a + (g - 0.5);
  Value res = sqrt(fac / std::exp(1.0)) / lanczos_sum_expg_scaled(a);
  Value numfac = (x - a - g + 0.5) / fac;
  Value small = res * exp(a - x) * pow(x / fac, a);
  Value large = res * exp(a * (log1p(numfac) - numfac) + x * (0.5 - g) / fac);
  Value near = sel(and_(lt(a, 200.0), lt(x, 200.0)), small, large);
  return sel(gt(fabs(a - x), 0.4 * fabs(a)), far, near);
}

// P(a, x) by DLMF 8.11.4 (ax = igam_fac(a, x)), for the elements not in `skip`.
Value igam_series(Value a, Value x, Value ax, Value skip) {
  const double eps = igam_eps(a);
  auto st = until_done({x, a, K(a, 1.0), K(a, 1.0)}, skip, kIgamMaxIter, [&](const std::vector<Value>& v) {
    Value r = v[1] + 1.0, c = v[2] * v[0] / r, ans = v[3] + c;
    return std::pair{std::vector<Value>{v[0], r, c, ans}, le(c, eps * ans)};
  });
  return sel(eq(ax, 0.0), 0.0, st[3] * ax / a);
}

// Q(a, x) by DLMF 8.7.3 (x <= 1.1), for the elements not in `skip`.
Value igamc_series(Value a, Value x, Value skip) {
  const double eps = igam_eps(a);
  auto st = until_done({a, x, K(a, 1.0), K(a, 1.0), K(a, 0.0)}, skip, kIgamMaxIter,
                       [&](const std::vector<Value>& v) {
                         Value n = v[2], fac = v[3] * -v[1] / n, term = fac / (v[0] + n), sum = v[4] + term;
                         return std::pair{std::vector<Value>{v[0], v[1], n + 1.0, fac, sum},
                                          le(fabs(term), eps * fabs(sum))};
                       });
  Value logx = log(x);
  Value term = -hlo::unary("exponential_minus_one", a * logx - lgamma(1.0 + a));
  return term - exp(a * logx - lgamma(a)) * st[4];
}

// Q(a, x) by the continued fraction DLMF 8.9.2 (x > 1.1, x >= a; ax =
// igam_fac(a, x)), for the elements not in `skip`.
Value igamc_cf(Value a, Value x, Value ax, Value skip) {
  const bool f64 = a.element() == ElementType::kF64;
  const double eps = igam_eps(a);
  const double big = f64 ? 4.503599627370496e15 : 16777216.;
  const double biginv = f64 ? 2.22044604925031308085e-16 : 5.9604644775390625E-8;
  Value y = 1.0 - a, z = x + y + 1.0;
  Value pkm1 = x + 1.0, qkm1 = z * x;
  // State: c, y, z, pkm2, pkm1, qkm2, qkm1, ans.
  auto st = until_done({K(a, 0.0), y, z, K(a, 1.0), pkm1, x, qkm1, pkm1 / qkm1}, skip, kIgamMaxIter,
                       [&](const std::vector<Value>& v) {
                         Value c = v[0] + 1.0, yy = v[1] + 1.0, zz = v[2] + 2.0, yc = yy * c;
                         Value pk = v[4] * zz - v[3] * yc, qk = v[6] * zz - v[5] * yc;
                         Value nz = ne(qk, 0.0);
                         Value r = pk / qk;
                         Value t = sel(nz, fabs((v[7] - r) / r), K(r, 1.0));
                         Value ans = sel(nz, r, v[7]);
                         Value scale = sel(gt(fabs(pk), big), K(a, biginv), K(a, 1.0));
                         return std::pair{std::vector<Value>{c, yy, zz, v[4] * scale, pk * scale, v[6] * scale,
                                                             qk * scale, ans},
                                          le(t, eps)};
                       });
  return sel(eq(ax, 0.0), 0.0, st[7] * ax);
}

// P (`lower`) or Q for large a near x: Temme's expansion, DLMF 8.12.3/8.12.4.
// The inner sums take all 25 coefficients (the ones past Cephes' break are
// below its precision); the outer one stops where Cephes does, at the
// first growing term (the series is asymptotic) or at convergence.
Value igam_asymptotic(Value a, Value x, bool lower) {
  const double eps = igam_eps(a);
  Value sigma = (x - a) / a, lambda = x / a;
  Value e = sqrt(-2.0 * (log1p(sigma) - sigma));
  Value eta = sel(gt(lambda, 1.0), e, sel(lt(lambda, 1.0), -e, K(a, 0.0)));
  const double sgn = lower ? -1.0 : 1.0;
  Value res = 0.5 * ew::erfc(sgn * eta * sqrt(a / 2.0));
  Value sum = K(a, 0.0), afac = K(a, 1.0), absold = K(a, kInf), stop = falses(a.builder(), a);
  for (int k = 0; k < 25; ++k) {
    Value ck = K(a, sc::k_igam_d[k][24]);
    for (int n = 23; n >= 0; --n) ck = ck * eta + sc::k_igam_d[k][n];
    Value term = ck * afac, absterm = fabs(term);
    stop = or_(stop, gt(absterm, absold));
    Value sum2 = sum + term;
    sum = sel(stop, sum, sum2);
    stop = or_(stop, lt(absterm, eps * fabs(sum2)));
    absold = absterm;
    afac = afac / a;
  }
  // 2 pi in float, as Math.h writes it (c10::pi<float>) for both types.
  const double two_pi = 2.0 * static_cast<double>(static_cast<float>(kPi));
  return res + sgn * exp(-0.5 * a * eta * eta) * sum / sqrt(two_pi * a);
}

// Boundary values (SciPy's): `lower` selects P = igamma, else Q = igammac.
Value igamma_edges(Value a, Value x, Value r, bool lower) {
  double p0 = lower ? 0.0 : 1.0, p1 = 1.0 - p0;
  Value a_inf = eq(fabs(a), kInf), x_inf = eq(fabs(x), kInf);
  r = sel(x_inf, p1, r);
  r = sel(a_inf, sel(x_inf, K(r, kNaN), K(r, p0)), r);
  r = sel(eq(x, 0.0), p0, r);
  r = sel(eq(a, 0.0), sel(gt(x, 0.0), K(r, p1), K(r, kNaN)), r);
  return sel(or_(lt(x, 0.0), lt(a, 0.0)), kNaN, r);
}

// P (`lower`) or Q, with calc_igamma's and calc_igammac's choice of method
// per element; each iterative method runs only where it is the one chosen.
Value igam(Value a, Value x, bool lower) {
  Value absxma_a = fabs(x - a) / a;
  Value asym = or_(and_(and_(gt(a, 20.0), lt(a, 200.0)), lt(absxma_a, 0.3)),
                   and_(gt(a, 200.0), lt(absxma_a, 4.5 / sqrt(a))));
  // Q's method (calc_igammac): 1 - P series, the continued fraction or the Q series.
  Value x_big = gt(x, 1.1), x_small = le(x, 0.5);
  Value q_by_p = sel(x_big, lt(x, a), sel(x_small, lt(-0.4 / log(x), a), lt(x * 1.1, a)));
  // The elements Q's own methods answer: for Q those not by the P series;
  // for P (calc_igamma) those where x > 1 and x > a, taken as 1 - Q (there
  // Q never chooses the P series). The rest take the P series.
  Value by_q = lower ? and_(gt(x, 1.0), gt(x, a)) : not_(q_by_p);
  Value iterative = not_(asym);
  Value use_p_series = and_(iterative, not_(by_q));
  Value use_cf = and_(and_(iterative, by_q), x_big);
  Value use_q_series = and_(and_(iterative, by_q), not_(x_big));
  Value ax = igam_fac(a, x);
  Value ps = igam_series(a, x, ax, not_(use_p_series));
  Value qc = sel(use_cf, igamc_cf(a, x, ax, not_(use_cf)), igamc_series(a, x, not_(use_q_series)));
  Value r = lower ? sel(use_p_series, ps, 1.0 - qc) : sel(use_p_series, 1.0 - ps, qc);
  r = sel(asym, igam_asymptotic(a, x, lower), r);
  return igamma_edges(a, x, r, lower);
}

Value igamma(Value a, Value x) { return igam(a, x, true); }
Value igammac(Value a, Value x) { return igam(a, x, false); }

// ---- error function family ---------------------------------------------------

Value erfinv(Value y) {
  const double a[] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  const double b[] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  const double c[] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  const double d[] = {3.543889200, 1.637067800};
  Value ya = fabs(y);
  Value z = y * y;
  Value num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
  Value dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
  Value central = y * num / dem;
  Value zt = sqrt(-log((1.0 - ya) / 2.0));
  Value numt = ((c[3] * zt + c[2]) * zt + c[1]) * zt + c[0];
  Value demt = (d[1] * zt + d[0]) * zt + 1.0;
  Value tail = sel(lt(y, 0.0), -numt, numt) / demt;
  Value x = sel(le(ya, 0.7), central, tail);
  const double two_over_sqrt_pi = 1.12837916709551257390;
  for (int i = 0; i < 2; ++i) x = x - (ew::erf(x) - y) / (two_over_sqrt_pi * exp(-(x * x)));
  x = sel(eq(ya, 1.0), sel(lt(y, 0.0), K(y, -kInf), K(y, kInf)), x);
  return sel(gt(ya, 1.0), kNaN, x);
}

// erfcx on y100 = 400 / (4 + |x|): a degree-6 polynomial per unit interval.
Value erfcx_y100(Value y100) {
  Builder& b = y100.builder();
  Value idx = hlo::convert(hlo::clamp(K(y100, 0), floor(y100), K(y100, 99)), ElementType::kI32);
  Value t = 2.0 * y100 - (2.0 * hlo::convert(idx, y100.element()) + 1.0);
  Value r = K(y100, 0);
  for (int j = sc::kErfcxDeg - 1; j >= 0; --j) {
    std::string lit;
    for (int i = 0; i < 100; ++i) {
      char buf[40];
      std::snprintf(buf, sizeof(buf), "%s%.17e", i ? ", " : "", sc::kErfcxTable[i][j]);
      lit += buf;
    }
    hlo::TensorType tt{y100.element(), {100}};
    Value table = b.emit("constant", {}, tt, "value = dense<[" + lit + "]> : " + tt.str());
    r = r * t + hlo::gather_1d(table, idx);
  }
  return sel(ge(y100, 100.0), 1.0, r);
}

Value erfcx(Value x) {
  const double ispi = 0.56418958354775628694807945156;
  Value x2 = x * x;
  Value cf = ispi * (x2 * (x2 + 4.5) + 2.0) / (x * (x2 * (x2 + 5.0) + 3.75));
  Value pos = sel(gt(x, 50.0), sel(gt(x, 5e7), ispi / x, cf), erfcx_y100(400.0 / (4.0 + fabs(x))));
  Value e2 = 2.0 * exp(x2);
  Value negv = sel(lt(x, -26.7), K(x, kInf), sel(lt(x, -6.1), e2, e2 - erfcx_y100(400.0 / (4.0 - x))));
  Value out = sel(ge(x, 0.0), pos, negv);
  return sel(is_nan(x), x, out);
}

Value ndtri(Value y0) {
  const double s2pi = 2.50662827463100050242E0;
  const double e2 = 0.13533528323661269189;
  Value code = not_(gt(y0, 1.0 - e2));
  Value y = sel(code, y0, 1.0 - y0);
  Value ym = y - 0.5;
  Value y2 = ym * ym;
  Value mid = (ym + ym * (y2 * poly(y2, sc::k_ndtri_P0) / poly(y2, sc::k_ndtri_Q0))) * s2pi;
  Value x = sqrt(-2.0 * log(y));
  Value x0 = x - log(x) / x;
  Value z = 1.0 / x;
  Value x1 = sel(lt(x, 8.0), z * poly(z, sc::k_ndtri_P1) / poly(z, sc::k_ndtri_Q1),
                 z * poly(z, sc::k_ndtri_P2) / poly(z, sc::k_ndtri_Q2));
  Value tail = x0 - x1;
  tail = sel(code, -tail, tail);
  Value out = sel(gt(y, e2), mid, tail);
  out = sel(or_(lt(y0, 0.0), gt(y0, 1.0)), kNaN, out);
  out = sel(eq(y0, 1.0), kInf, out);
  return sel(eq(y0, 0.0), -kInf, out);
}

Value log_ndtr(Value x) {
  Value t = x * 0.70710678118654752440;
  Value lo = log(erfcx(-t) / 2.0) - t * t;
  Value hi = log1p(-ew::erfc(t) / 2.0);
  return sel(lt(x, -1.0), lo, hi);
}

// ---- Bessel functions ---------------------------------------------------------

constexpr double kSqrt2OverPi = 0.797884560802865355879892119868763737;
constexpr double kPiOver4 = 0.785398163397448309615660845819875721;
constexpr double k3PiOver4 = 2.356194490192344928846982537459627163;
constexpr double kTwoOverPi = 0.636619772367581343075535053490057448;

Value i0e_small(Value a) { return chbevl(a / 2.0 - 2.0, sc::k_i0e_A); }
Value i0e_big(Value a) { return chbevl(32.0 / a - 2.0, sc::k_i0e_B) / sqrt(a); }
Value i1e_small(Value a) { return chbevl(a / 2.0 - 2.0, sc::k_i1e_A) * a; }
Value i1e_big(Value a) { return chbevl(32.0 / a - 2.0, sc::k_i1e_B) / sqrt(a); }

Value i0(Value x) {
  Value a = fabs(x);
  return sel(le(a, 8.0), exp(a) * i0e_small(a), exp(a) * i0e_big(a));
}
Value i0e(Value x) {
  Value a = fabs(x);
  return sel(le(a, 8.0), i0e_small(a), i0e_big(a));
}
Value i1(Value x) {
  Value a = fabs(x);
  Value out = sel(le(a, 8.0), exp(a) * i1e_small(a), exp(a) * i1e_big(a));
  return sel(lt(x, 0.0), -out, out);
}
Value i1e(Value x) {
  Value a = fabs(x);
  Value out = sel(le(a, 8.0), i1e_small(a), i1e_big(a));
  return sel(lt(x, 0.0), -out, out);
}

// K0 / K1 (scaled by exp(x) when `scaled`); NaN below 0, inf at 0.
Value bessel_k(Value x, int order, bool scaled) {
  Value small, big;
  if (order == 0) {
    small = chbevl(x * x - 2.0, sc::k_modified_bessel_k0_A) - log(0.5 * x) * i0(x);
    big = chbevl(8.0 / x - 2.0, sc::k_modified_bessel_k0_B) / sqrt(x);
  } else {
    small = log(0.5 * x) * i1(x) + chbevl(x * x - 2.0, sc::k_modified_bessel_k1_A) / x;
    big = chbevl(8.0 / x - 2.0, sc::k_modified_bessel_k1_B) / sqrt(x);
  }
  Value out = scaled ? sel(le(x, 2.0), small * exp(x), big) : sel(le(x, 2.0), small, exp(-x) * big);
  out = sel(lt(x, 0.0), kNaN, out);
  return sel(eq(x, 0.0), kInf, out);
}

// The asymptotic form shared by J0/Y0 (phase pi/4) and J1/Y1 (3 pi/4):
// (P cos(x - phase) -/+ 5/x Q sin(x - phase)) sqrt(2/pi) / sqrt(x).
template <size_t A, size_t B, size_t C, size_t D>
Value bessel_asym(Value x, const double (&pp)[A], const double (&pq)[B], const double (&qp)[C],
                  const double (&qq)[D], double phase, bool y_kind) {
  Value z = 25.0 / (x * x);
  Value p = poly(z, pp) / poly(z, pq);
  Value q = 5.0 / x * (poly(z, qp) / poly(z, qq));
  Value s = sin(x - phase), c = cos(x - phase);
  Value r = y_kind ? p * s + q * c : p * c - q * s;
  return r * kSqrt2OverPi / sqrt(x);
}

Value bessel_j0(Value xin) {
  Value x = fabs(xin);
  Value x2 = x * x;
  Value small = (x2 - 5.78318596294678452118e+00) * (x2 - 3.04712623436620863991e+01) *
                poly(x2, sc::k_bessel_j0_RP) / poly(x2, sc::k_bessel_j0_RQ);
  small = sel(lt(x, 1e-5), 1.0 - x2 / 4.0, small);
  Value big = bessel_asym(x, sc::k_bessel_j0_PP, sc::k_bessel_j0_PQ, sc::k_bessel_j0_QP, sc::k_bessel_j0_QQ,
                          kPiOver4, false);
  return sel(le(x, 5.0), small, big);
}

Value bessel_j1(Value xin) {
  Value x = fabs(xin);
  Value x2 = x * x;
  Value small = poly(x2, sc::k_bessel_j1_RP) / poly(x2, sc::k_bessel_j1_RQ) * x *
                (x2 - 1.46819706421238932572e+01) * (x2 - 4.92184563216946036703e+01);
  Value big = bessel_asym(x, sc::k_bessel_j1_PP, sc::k_bessel_j1_PQ, sc::k_bessel_j1_QP, sc::k_bessel_j1_QQ,
                          k3PiOver4, false);
  Value out = sel(le(x, 5.0), small, big);
  out = sel(lt(xin, 0.0), -out, out);
  return sel(eq(xin, 0.0), xin, out);  // odd: j1(-0) is -0
}

Value bessel_y0(Value x) {
  Value x2 = x * x;
  Value small = poly(x2, sc::k_bessel_y0_YP) / poly(x2, sc::k_bessel_y0_YQ) + kTwoOverPi * log(x) * bessel_j0(x);
  small = sel(lt(x, 0.0), kNaN, small);
  small = sel(eq(x, 0.0), -kInf, small);
  Value big = bessel_asym(x, sc::k_bessel_y0_PP, sc::k_bessel_y0_PQ, sc::k_bessel_y0_QP, sc::k_bessel_y0_QQ,
                          kPiOver4, true);
  return sel(le(x, 5.0), small, big);
}

Value bessel_y1(Value x) {
  Value x2 = x * x;
  Value small = x * (poly(x2, sc::k_bessel_y1_YP) / poly(x2, sc::k_bessel_y1_YQ)) +
                kTwoOverPi * (bessel_j1(x) * log(x) - 1.0 / x);
  small = sel(lt(x, 0.0), kNaN, small);
  small = sel(eq(x, 0.0), -kInf, small);
  Value big = bessel_asym(x, sc::k_bessel_y1_PP, sc::k_bessel_y1_PQ, sc::k_bessel_y1_QP, sc::k_bessel_y1_QQ,
                          k3PiOver4, true);
  return sel(le(x, 5.0), small, big);
}

Value airy_ai(Value x) {
  const double c1 = 0.355028053887817239260, c2 = 0.258819403792806798405;
  const double sqpii = 5.64189583547756286948e-01;
  // x < -2.09: oscillating asymptotic form.
  Value nx = fabs(x);
  Value zt = -2.0 * x * sqrt(nx) / 3.0;
  Value z = 1.0 / zt, zz = z * z;
  Value t = zt + 0.25 * kPi;
  Value negv = sqpii / sqrt(sqrt(nx)) *
               (sin(t) * (1.0 + zz * poly(zz, sc::k_airy_ai_AFN) / poly(zz, sc::k_airy_ai_AFD)) -
                cos(t) * (z * poly(zz, sc::k_airy_ai_AGN) / poly(zz, sc::k_airy_ai_AGD)));
  // x >= 2.09: decaying asymptotic form.
  Value zeta = 2.0 * x * sqrt(nx) / 3.0;
  Value iz = 1.0 / zeta;
  Value posv = sqpii * (poly(iz, sc::k_airy_ai_AN) / poly(iz, sc::k_airy_ai_AD)) / (2.0 * sqrt(sqrt(nx)) * exp(zeta));
  // Power series in between.
  Value f = K(x, 1), g = x, k = K(x, 1), m = K(x, 1), n = x, tt = K(x, 1);
  Value z3 = x * x * x;
  double eps = machine_eps(x);
  for (int i = 0; i < 12; ++i) {
    Value go = gt(tt, eps);
    Value m2 = m * z3, k2 = k + 1.0;
    m2 = m2 / k2;
    Value n2 = n * z3;
    k2 = k2 + 1.0;
    n2 = n2 / k2;
    m2 = m2 / k2;
    Value f2 = f + m2;
    k2 = k2 + 1.0;
    n2 = n2 / k2;
    Value g2 = g + n2;
    m = sel(go, m2, m);
    n = sel(go, n2, n);
    k = sel(go, k2, k);
    f = sel(go, f2, f);
    g = sel(go, g2, g);
    tt = sel(go, fabs(m2 / f2), tt);
  }
  Value mid = c1 * f - c2 * g;
  Value out = sel(lt(x, -2.09), negv, sel(ge(x, 2.09), posv, mid));
  out = sel(gt(x, 103.892), 0.0, out);
  return sel(eq(fabs(x), kInf), kNaN, out);
}

Value spherical_bessel_j0(Value x) {
  Value x2 = x * x;
  Value series =
      1.0 + x2 * (-1.0 / 6.0 +
                  x2 * (1.0 / 120.0 +
                        x2 * (-1.0 / 5040.0 +
                              x2 * (1.0 / 362880.0 + x2 * (-1.0 / 39916800.0 + x2 * (1.0 / 6227020800.0))))));
  Value out = sel(lt(fabs(x), 0.5), series, sin(x) / x);
  return sel(eq(fabs(x), kInf), 0.0, out);
}

// d x / d alpha for a sample x of a standard Gamma(alpha): the implicit
// reparameterization gradient -(d/dalpha cdf(x; alpha)) / pdf(x; alpha),
// by the three approximations CPU's and CUDA's kernels use: a Taylor series
// of the incomplete gamma function for x < 0.8, Rice's saddle-point
// expansion for alpha > 8, else a bivariate rational fit in log(x / alpha)
// and log(alpha).
Value standard_gamma_grad(Value alpha, Value x) {
  // x < 0.8: the series (a NaN, x = 0, is 0 as on CPU).
  Value numer = K(x, 1.0), denom = alpha;
  Value series1 = numer / denom, series2 = numer / (denom * denom);
  for (int i = 1; i <= 5; ++i) {
    numer = numer * (-x / static_cast<double>(i));
    denom = denom + 1.0;
    series1 = series1 + numer / denom;
    series2 = series2 + numer / (denom * denom);
  }
  Value x_pow_alpha = pow(x, alpha);
  Value pdf = pow(x, alpha - 1.0) * exp(-x);
  Value cdf_alpha = (log(x) - digamma(alpha)) * (x_pow_alpha * series1) - x_pow_alpha * series2;
  Value small_x = -cdf_alpha / pdf;
  small_x = sel(is_nan(small_x), 0.0, small_x);
  // alpha > 8: Rice's expansion, its polynomial form within 10% of alpha.
  Value a2 = alpha * alpha;
  Value near = (1.0 + 24.0 * alpha * (1.0 + 12.0 * alpha)) *
               (1440.0 * a2 + 6.0 * x * (53.0 - 120.0 * x) - 65.0 * x * x / alpha + alpha * (107.0 + 3600.0 * x)) /
               (1244160.0 * a2 * a2);
  Value den = sqrt(8.0 * alpha);
  Value term2 = den / (alpha - x);
  Value term3 = pow(x - alpha - alpha * log(x / alpha), K(x, -1.5));
  Value term23 = sel(lt(x, alpha), term2 - term3, term2 + term3);
  Value term1 = log(x / alpha) * term23 - sqrt(2.0 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x));
  Value stirling = 1.0 + 1.0 / (12.0 * alpha) * (1.0 + 1.0 / (24.0 * alpha));
  Value far = -stirling * (x * term1) / den;
  Value large_alpha = sel(and_(le(0.9 * alpha, x), le(x, 1.1 * alpha)), near, far);
  // Otherwise: exp(p(u, v) / q(u, v)), u = log(x / alpha), v = log(alpha).
  static const double coef[3][8] = {
      {0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084},
      {0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
       -0.00058392623},
      {0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
       -1.5247877e-07},
  };
  Value u = log(x / alpha), v = log(alpha);
  std::vector<Value> c;
  for (int i = 0; i < 8; ++i) c.push_back(coef[0][i] + u * (coef[1][i] + u * coef[2][i]));
  Value p = c[0] + v * (c[1] + v * (c[2] + v * c[3]));
  Value q = c[4] + v * (c[5] + v * (c[6] + v * c[7]));
  Value rational = exp(p / q);
  return sel(lt(x, 0.8), small_x, sel(gt(alpha, 8.0), large_alpha, rational));
}

// Reparameterization gradients of a Beta(alpha, beta) sample x with respect
// to alpha, scaled by 1 / (1 - x) (Dirichlet.rsample's backward, through
// its Beta marginals; total = alpha + beta), by the four approximations
// CPU's and CUDA's kernels use, selected per element in the same order.
// x near 0: a series in x.
Value beta_grad_alpha_small(Value x, Value alpha, Value beta) {
  Value factor = digamma(alpha) - digamma(alpha + beta) - log(x);
  Value numer = K(x, 1.0);
  Value series = numer / alpha * (factor + 1.0 / alpha);
  for (int i = 1; i <= 10; ++i) {
    double fi = i;
    numer = numer * ((fi - beta) * x / fi);
    Value denom = alpha + fi;
    series = series + numer / denom * (factor + 1.0 / denom);
  }
  Value out = x * pow(1.0 - x, -beta) * series;
  return sel(is_nan(out), 0.0, out);
}
// x near 0, with respect to beta.
Value beta_grad_beta_small(Value x, Value alpha, Value beta) {
  Value factor = digamma(alpha + beta) - digamma(beta);
  Value numer = K(x, 1.0), betas = K(x, 1.0), dbetas = K(x, 0.0);
  Value series = factor / alpha;
  for (int i = 1; i <= 8; ++i) {
    double fi = i;
    numer = numer * (-x / fi);
    dbetas = dbetas * (beta - fi) + betas;
    betas = betas * (beta - fi);
    series = series + numer / (alpha + fi) * (dbetas + factor * betas);
  }
  Value out = -pow(1.0 - x, 1.0 - beta) * series;
  return sel(is_nan(out), 0.0, out);
}
// alpha and beta both large: Rice's saddle-point expansion, its polynomial
// form within a tenth of a standard deviation of the mean.
Value beta_grad_alpha_mid(Value x, Value alpha, Value beta) {
  Value total = alpha + beta;
  Value mean = alpha / total;
  Value sd = sqrt(alpha * beta / (total + 1.0)) / total;
  Value b2 = beta * beta;
  Value poly = 47.0 * x * b2 * b2 +
               alpha * ((43.0 + 20.0 * (16.0 + 27.0 * beta) * x) * b2 * beta +
                        alpha * (3.0 * (59.0 + 180.0 * beta - 90.0 * x) * b2 +
                                 alpha * ((453.0 + 1620.0 * beta * (1.0 - x) - 455.0 * x) * beta +
                                          alpha * (8.0 * (1.0 - x) * (135.0 * beta - 11.0)))));
  Value prefactor_num = (1.0 + 12.0 * alpha) * (1.0 + 12.0 * beta) / (total * total);
  Value prefactor_den = 12960.0 * alpha * alpha * alpha * b2 * (1.0 + 12.0 * total);
  Value near = prefactor_num / (1.0 - x) * poly / prefactor_den;
  Value prefactor = -x / sqrt(2.0 * alpha * beta / total);
  auto st = [](Value v) { return 1.0 + 1.0 / (12.0 * v) + 1.0 / (288.0 * v * v); };
  Value stirling = st(alpha) * st(beta) / st(total);
  Value axbx = alpha * (x - 1.0) + beta * x;
  Value term1 = (2.0 * alpha * alpha * (x - 1.0) + alpha * beta * (x - 1.0) - x * b2) /
                (sqrt(2.0 * alpha / beta) * pow(total, K(total, 1.5)) * axbx * axbx);
  Value term2 = 0.5 * log(alpha / (total * x));
  Value term3 = sqrt(8.0 * alpha * beta / total) / (beta * x + alpha * (x - 1.0));
  Value term4 = pow(beta * log(beta / (total * (1.0 - x))) + alpha * log(alpha / (total * x)), K(x, -1.5));
  Value term1234 = term1 + term2 * (term3 + sel(lt(x, mean), term4, -term4));
  Value far = stirling * prefactor * term1234;
  return sel(and_(le(mean - 0.1 * sd, x), le(x, mean + 0.1 * sd)), near, far);
}
Value dirichlet_grad(Value x, Value alpha, Value total) {
  Value beta = total - alpha;
  Value boundary = total * x * (1.0 - x);
  // Otherwise: a rational correction p / q to an analytic approximation,
  // in u = log(x), a = log(alpha) - u, b = log(total) - a.
  static const double c[2][3][3][4] = {
      {{{1.003668233, -0.01061107488, -0.0657888334, 0.01201642863},
        {0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033},
        {-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013}},
       {{0.221950385, -0.3187676331, 0.01799915743, 0.01074823814},
        {-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057},
        {0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05}},
       {{-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565},
        {0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181},
        {0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05}}},
      {{{1, -0.02924021934, -0.04438342661, 0.007285809825},
        {0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521},
        {-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149}},
       {{0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273},
        {0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956},
        {-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05}},
       {{0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05},
        {0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05},
        {-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06}}},
  };
  Value u = log(x);
  Value a = log(alpha) - u;
  Value b = log(total) - a;
  Value pow_u[3] = {K(x, 1.0), u, u * u};
  Value pow_a[3] = {K(x, 1.0), a, a * a};
  Value p = K(x, 0.0), q = K(x, 0.0);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      Value ua = pow_u[i] * pow_a[j];
      const double* cp = c[0][i][j];
      const double* cq = c[1][i][j];
      p = p + ua * (cp[0] + b * (cp[1] + b * (cp[2] + b * cp[3])));
      q = q + ua * (cq[0] + b * (cq[1] + b * (cq[2] + b * cq[3])));
    }
  }
  Value rational = p / q * (x * (digamma(total) - digamma(alpha)) / beta);
  Value out = sel(and_(gt(alpha, 6.0), gt(beta, 6.0)), beta_grad_alpha_mid(x, alpha, beta), rational);
  out = sel(and_(ge(x, 0.5), lt(boundary, 0.75)), -beta_grad_beta_small(1.0 - x, beta, alpha), out);
  return sel(and_(le(x, 0.5), lt(boundary, 2.5)), beta_grad_alpha_small(x, alpha, beta), out);
}

// `self` (or `x`) in its compute type.
Value unary_in(LowerCtx& ctx) {
  const char* name = ctx.has("self") ? "self" : "x";
  return arg_in(ctx, name, compute_type(ctx, {name}));
}

}  // namespace

#define TPU_SPECIAL_UNARY(name, fn) \
  TPU_LOWERING(name) { return {fn(unary_in(ctx))}; }

TPU_SPECIAL_UNARY(lgamma, lgamma)
TPU_SPECIAL_UNARY(digamma, digamma)
TPU_SPECIAL_UNARY(erfinv, erfinv)
TPU_SPECIAL_UNARY(special_erfcx, erfcx)
TPU_SPECIAL_UNARY(special_ndtri, ndtri)
TPU_SPECIAL_UNARY(special_log_ndtr, log_ndtr)
TPU_SPECIAL_UNARY(i0, i0)
TPU_SPECIAL_UNARY(special_i0e, i0e)
TPU_SPECIAL_UNARY(special_i1, i1)
TPU_SPECIAL_UNARY(special_i1e, i1e)
TPU_SPECIAL_UNARY(special_modified_bessel_i0, i0)
TPU_SPECIAL_UNARY(special_modified_bessel_i1, i1)
TPU_SPECIAL_UNARY(special_bessel_j0, bessel_j0)
TPU_SPECIAL_UNARY(special_bessel_j1, bessel_j1)
TPU_SPECIAL_UNARY(special_bessel_y0, bessel_y0)
TPU_SPECIAL_UNARY(special_bessel_y1, bessel_y1)
TPU_SPECIAL_UNARY(special_airy_ai, airy_ai)
TPU_SPECIAL_UNARY(special_spherical_bessel_j0, spherical_bessel_j0)

TPU_LOWERING(special_modified_bessel_k0) { return {bessel_k(unary_in(ctx), 0, false)}; }
TPU_LOWERING(special_modified_bessel_k1) { return {bessel_k(unary_in(ctx), 1, false)}; }
TPU_LOWERING(special_scaled_modified_bessel_k0) { return {bessel_k(unary_in(ctx), 0, true)}; }
TPU_LOWERING(special_scaled_modified_bessel_k1) { return {bessel_k(unary_in(ctx), 1, true)}; }

// polygamma(int n, Tensor self)
// mvlgamma(self, p): log of the multivariate gamma function, as CPU
// composes it: sum over j < p of lgamma(x - (p - 1 - j) / 2), plus
// p (p - 1) / 4 log(pi). (CPU's check that every x > (p - 1) / 2 reads the
// data; it is made by the composite functional form, not here.)
TPU_LOWERING(mvlgamma) {
  int64_t p = ctx.int_arg("p");
  TORCH_CHECK(p >= 1, "p has to be greater than or equal to 1");
  Value x = unary_in(ctx);
  Value sum = K(x, 0.0);
  for (int64_t j = 0; j < p; ++j) sum = sum + lgamma(x - 0.5 * static_cast<double>(p - 1 - j));
  return {sum + static_cast<double>(p * (p - 1)) * std::log(M_PI) / 4.0};
}

// The reparameterization gradients below compute float32 in float64, as
// CPU's kernels do (their saddle-point terms cancel near the mean: float32
// gave up to 8% error there for Dirichlet), except on a TPU, which has no
// native float64 (CUDA's kernels compute in float32 too).
namespace {
at::ScalarType cpu_precision(at::ScalarType t) { return scalar_type(cpu_accumulation(element_type(t))); }
}  // namespace

// _standard_gamma_grad(self = alpha, output = the sample): Gamma.rsample's backward.
TPU_LOWERING(_standard_gamma_grad) {
  at::ScalarType t = compute_type(ctx, {"self", "output"}), wide = cpu_precision(t);
  return {hlo::convert(standard_gamma_grad(arg_in(ctx, "self", wide), arg_in(ctx, "output", wide)), element_type(t))};
}

// _dirichlet_grad(x, alpha, total): Dirichlet's and Beta's rsample backward.
TPU_LOWERING(_dirichlet_grad) {
  at::ScalarType t = compute_type(ctx, {"x", "alpha", "total"}), wide = cpu_precision(t);
  Value out = dirichlet_grad(arg_in(ctx, "x", wide), arg_in(ctx, "alpha", wide), arg_in(ctx, "total", wide));
  return {hlo::convert(out, element_type(t))};
}

TPU_LOWERING(polygamma) { return {polygamma(ctx.int_arg("n"), unary_in(ctx))}; }

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
TPU_LOWERING(sinc) {
  Value x = unary_in(ctx);
  Value px = kPi * x;
  return {sel(eq(x, 0.0), 1.0, sin(px) / px)};
}

// logit(self, eps?) = log(x / (1 - x)), x clamped to [eps, 1 - eps] first.
TPU_LOWERING(logit) {
  Value x = unary_in(ctx);
  auto eps = ctx.opt_float("eps");
  if (eps && *eps >= 0) {
    x = sel(lt(x, *eps), K(x, *eps), x);
    x = sel(gt(x, 1.0 - *eps), K(x, 1.0 - *eps), x);
  }
  return {log(x / (1.0 - x))};
}

// logit_backward(grad_output, self, eps?)
TPU_LOWERING(logit_backward) {
  auto dims = out_dims(ctx, {"grad_output", "self"});
  auto t = compute_type(ctx, {"grad_output", "self"});
  Value dy = in(ctx, "grad_output", t, dims), x = in(ctx, "self", t, dims);
  Value g = dy / (x * (1.0 - x));
  auto eps = ctx.opt_float("eps");
  if (eps && *eps >= 0) return {sel(or_(lt(x, *eps), gt(x, 1.0 - *eps)), 0.0, g)};
  return {sel(or_(lt(x, 0.0), gt(x, 1.0)), kNaN, g)};
}

// entr(x) = -x log x, 0 at 0, -inf below.
TPU_LOWERING(special_entr) {
  Value x = unary_in(ctx);
  Value out = -(x * log(x));
  out = sel(eq(x, 0.0), 0.0, out);
  out = sel(lt(x, 0.0), -kInf, out);
  return {sel(is_nan(x), x, out)};
}

// xlog1py(self, other) = self * log1p(other), 0 where self == 0 (unless other is NaN).
TPU_LOWERING(special_xlog1py) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto rt = float_type(ctx.result_type({"self", "other"})), t = opmath(rt);
  Value x = in(ctx, "self", t, dims), y = in(ctx, "other", t, dims);
  // bf16/f16: log1p(y) is rounded to that type before the product, as CPU
  // and CUDA compute in it (xlogy alike).
  Value l = log1p(y);
  if (t != rt) l = round_through(l, rt);
  Value r = sel(eq(x, 0.0), 0.0, x * l);
  return {sel(is_nan(y), y, r)};
}

// igamma(self = a, other = x) = P(a, x); igammac = Q(a, x).
TPU_LOWERING(igamma) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = compute_type(ctx, {"self", "other"});
  return {igamma(in(ctx, "self", t, dims), in(ctx, "other", t, dims))};
}

TPU_LOWERING(igammac) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = compute_type(ctx, {"self", "other"});
  return {igammac(in(ctx, "self", t, dims), in(ctx, "other", t, dims))};
}

// zeta(self, other): Hurwitz zeta(x = self, q = other).
TPU_LOWERING(special_zeta) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = compute_type(ctx, {"self", "other"});
  return {zeta(in(ctx, "self", t, dims), in(ctx, "other", t, dims))};
}

}  // namespace torch_tpu::lowering
