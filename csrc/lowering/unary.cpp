// Unary math (exp, log, trig, rounding, erf, ...), clamp, where, masked_fill.
// Float functions compute in float32 for bf16/f16 inputs (PyTorch's opmath
// type) and in the default float dtype for integer inputs.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <limits>

#include "lowering/elementwise_util.h"

namespace torch_tpu::lowering {

using namespace ew;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;

// `self` as a float value to compute a float function on.
Value float_self(LowerCtx& ctx) { return ctx.operand("self", opmath(float_type(ctx.dtype_of("self")))); }

Value un(const char* op, Value x) { return hlo::unary(op, x); }
Value lt(Value a, double v) { return hlo::compare(a, hlo::full_like(a, v), "LT"); }
Value sqrt_1mx2(Value x) {  // sqrt(1 - x^2), accurate near |x| = 1
  return un("sqrt", hlo::mul(hlo::sub(hlo::full_like(x, 1), x), hlo::add(hlo::full_like(x, 1), x)));
}

// Coefficients of our own least-squares fits (relative error ~3e-8):
//   erf(x)  = x * A(x^2)                    for |x| < 1
//   erfc(x) = exp(-x^2) / x * B(1/x^2)      for 1 <= x < 2
//   erfc(x) = exp(-x^2) / x * C(1/x^2)      for x >= 2
constexpr double kErfA[] = {7.853823465297403e-05, -0.0008010182147793476, 0.00518832637904236,
                            -0.02685381124749507, 0.11283585132174734,     -0.37612625822786067,
                            1.1283791657265028};
constexpr double kErfcB[] = {0.023262689320094104, -0.13867648807074617, 0.3686841920404504,
                             -0.5824045902091095,  0.6209513486442555,   -0.49442978507231117,
                             0.3404821783077542,   -0.2741118452724417,  0.5638258893861645};
constexpr double kErfcC[] = {-11.393638881953171, 13.834660046773044,   -7.816846526367328,
                             2.982444086435877,   -1.0215759737506618,  0.42218184725963537,
                             -0.28208477262418263, 0.5641895661782499};

Value to_f32(Value x) {
  auto e = x.element();
  return (e == ElementType::kBF16 || e == ElementType::kF16) ? hlo::convert(x, ElementType::kF32) : x;
}

// erfc(a) for a >= 1 (garbage below, selected away by callers).
Value erfc_ge1(Value a) {
  Value t = hlo::div(hlo::full_like(a, 1), hlo::mul(a, a));
  Value p = hlo::select(lt(a, 2), polynomial(t, kErfcB), polynomial(t, kErfcC));
  Value e = un("exponential", hlo::neg(hlo::mul(a, a)));
  return hlo::div(hlo::mul(e, p), a);
}

Value erf_small(Value x) { return hlo::mul(x, polynomial(hlo::mul(x, x), kErfA)); }

// v * c for a real constant c; for complex v each part is scaled (a complex
// product would make (-inf) * 0 a NaN imaginary part: log2(0)).
Value scaled(Value v, double c) {
  if (!hlo::is_complex(v.element())) return hlo::mul(v, hlo::full_like(v, c));
  Value re = hlo::real(v), im = hlo::imag(v);
  return hlo::make_complex(hlo::mul(re, hlo::full_like(re, c)), hlo::mul(im, hlo::full_like(im, c)));
}

double max_of(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::max());
    case at::kHalf: return static_cast<double>(std::numeric_limits<c10::Half>::max());
    case at::kFloat: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

}  // namespace

namespace ew {

// The sign bit of a float value (-0 and -nan included).
Value sign_bit(Value x) {
  int bits = hlo::element_bits(x.element());
  auto ie = bits == 16 ? ElementType::kI16 : bits == 32 ? ElementType::kI32 : ElementType::kI64;
  return lt(hlo::bitcast_convert(x, ie), 0);
}

// Complex `op` with f(conj z) = conj f(z) (sqrt, asin, acos, acosh): XLA's
// expansions read a -0 imaginary part as +0 and answer on the wrong side of
// the branch cut (sqrt(-4 - 0i) gave +2i; CPU, like C99, gives -2i). Evaluated
// at |imag| and conjugated back.
Value conj_symmetric(const char* op, Value z) {
  Value im = hlo::imag(z);
  Value r = hlo::unary(op, hlo::make_complex(hlo::real(z), hlo::unary("abs", im)));
  return hlo::select(sign_bit(im), hlo::conj(r), r);
}

Value principal_sqrt(Value x) { return hlo::is_complex(x.element()) ? conj_symmetric("sqrt", x) : hlo::unary("sqrt", x); }

// float64 uses XLA's erf/erfc (Cephes' double coefficients); our fits are
// float32-accurate only (~3e-8 relative).
Value erf(Value x_in) {
  if (x_in.element() == ElementType::kF64) return un("chlo.erf", x_in);
  Value x = to_f32(x_in);
  Value a = un("abs", x);
  Value big = hlo::sub(hlo::full_like(a, 1), erfc_ge1(a));
  big = hlo::select(lt(x, 0), hlo::neg(big), big);
  Value r = hlo::select(lt(a, 1), erf_small(x), big);
  return hlo::select(is_nan(x), x, r);
}

Value erfc(Value x_in) {
  if (x_in.element() == ElementType::kF64) return un("chlo.erfc", x_in);
  Value x = to_f32(x_in);
  Value a = un("abs", x);
  Value tail = erfc_ge1(a);
  tail = hlo::select(lt(x, 0), hlo::sub(hlo::full_like(a, 2), tail), tail);
  Value r = hlo::select(lt(a, 1), hlo::sub(hlo::full_like(x, 1), erf_small(x)), tail);
  return hlo::select(is_nan(x), x, r);
}

}  // namespace ew

#define TPU_FLOAT_UNARY(name, ...) \
  TPU_LOWERING(name) {             \
    Value x = float_self(ctx);     \
    return {__VA_ARGS__};          \
  }

// A float function whose real formula below does not hold for complex
// arguments: complex inputs use CHLO's op (XLA expands it with the branch
// cuts and accuracy of the C library's complex functions).
#define TPU_FLOAT_UNARY_C(name, chlo_op, ...)              \
  TPU_LOWERING(name) {                                     \
    Value x = float_self(ctx);                             \
    if (hlo::is_complex(x.element())) return {un(chlo_op, x)}; \
    return {__VA_ARGS__};                                  \
  }
// The same for functions with f(conj z) = conj f(z) (conj_symmetric).
#define TPU_FLOAT_UNARY_CS(name, chlo_op, ...)                             \
  TPU_LOWERING(name) {                                                     \
    Value x = float_self(ctx);                                             \
    if (hlo::is_complex(x.element())) return {conj_symmetric(chlo_op, x)}; \
    return {__VA_ARGS__};                                                  \
  }

TPU_FLOAT_UNARY(exp, un("exponential", x))
TPU_FLOAT_UNARY(exp2, hlo::binary("power", hlo::full_like(x, 2), x))
TPU_FLOAT_UNARY(expm1, un("exponential_minus_one", x))
TPU_FLOAT_UNARY(log, un("log", x))
TPU_FLOAT_UNARY(log2, scaled(un("log", x), 1 / kLn2))
TPU_FLOAT_UNARY(log10, scaled(un("log", x), 1 / kLn10))
TPU_FLOAT_UNARY(log1p, un("log_plus_one", x))
TPU_FLOAT_UNARY(sqrt, principal_sqrt(x))
TPU_FLOAT_UNARY(rsqrt, un("rsqrt", x))
TPU_FLOAT_UNARY(sin, un("sine", x))
TPU_FLOAT_UNARY(cos, un("cosine", x))
TPU_FLOAT_UNARY(tan, un("tan", x))
TPU_FLOAT_UNARY(tanh, un("tanh", x))
TPU_FLOAT_UNARY(sigmoid, un("logistic", x))
TPU_FLOAT_UNARY_C(atan, "chlo.atan", hlo::binary("atan2", x, hlo::full_like(x, 1)))
// asin(x) = 2 atan2(x, 1 + sqrt(1 - x^2))
TPU_FLOAT_UNARY_CS(asin, "chlo.asin", hlo::mul(hlo::full_like(x, 2), hlo::binary("atan2", x, hlo::add(hlo::full_like(x, 1), sqrt_1mx2(x)))))
// acos(x) = 2 atan2(sqrt(1 - x^2), 1 + x), pi at x = -1
TPU_FLOAT_UNARY_CS(acos, "chlo.acos", hlo::select(hlo::compare(x, hlo::full_like(x, -1), "EQ"), hlo::full_like(x, kPi),
                                  hlo::mul(hlo::full_like(x, 2), hlo::binary("atan2", sqrt_1mx2(x), hlo::add(hlo::full_like(x, 1), x)))))
TPU_FLOAT_UNARY(erf, ew::erf(x))
TPU_FLOAT_UNARY(erfc, ew::erfc(x))

TPU_LOWERING(sinh) {
  Value x = float_self(ctx);
  if (hlo::is_complex(x.element())) return {un("chlo.sinh", x)};
  Value a = un("abs", x);
  // |x| < 1: (expm1(x) - expm1(-x)) / 2; else sign(x) (e - 1/(4e)) with e = exp(|x| - ln 2).
  Value small = hlo::mul(hlo::full_like(x, 0.5), hlo::sub(un("exponential_minus_one", x), un("exponential_minus_one", hlo::neg(x))));
  Value e = un("exponential", hlo::sub(a, hlo::full_like(a, kLn2)));
  Value big = hlo::sub(e, hlo::div(hlo::full_like(e, 0.25), e));
  big = hlo::select(lt(x, 0), hlo::neg(big), big);
  return {hlo::select(lt(a, 1), small, big)};
}

TPU_LOWERING(cosh) {
  Value x = float_self(ctx);
  if (hlo::is_complex(x.element())) return {un("chlo.cosh", x)};
  Value e = un("exponential", hlo::sub(un("abs", x), hlo::full_like(x, kLn2)));
  return {hlo::add(e, hlo::div(hlo::full_like(e, 0.25), e))};
}

TPU_LOWERING(asinh) {
  Value x = float_self(ctx);
  if (hlo::is_complex(x.element())) {
    // Odd and conj-symmetric: evaluated at |re| (XLA reads re = -0 as +0, the
    // wrong side of the cut on the imaginary axis), asinh(z) = -conj(asinh(w)).
    Value re = hlo::real(x);
    Value r = un("chlo.asinh", hlo::make_complex(un("abs", re), hlo::imag(x)));
    return {hlo::select(sign_bit(re), hlo::neg(hlo::conj(r)), r)};
  }
  Value a = un("abs", x);
  // log1p(a + a^2 / (1 + sqrt(1 + a^2))), or log(a) + ln 2 where a^2 overflows.
  Value a2 = hlo::mul(a, a);
  Value r = un("log_plus_one", hlo::add(a, hlo::div(a2, hlo::add(hlo::full_like(a, 1), un("sqrt", hlo::add(hlo::full_like(a, 1), a2))))));
  Value large = hlo::add(un("log", a), hlo::full_like(a, kLn2));
  r = hlo::select(lt(a, 1e18), r, large);
  // x itself at NaN and at +-0 (asinh(-0) is -0).
  Value keep = or_(is_nan(x), hlo::compare(x, hlo::full_like(x, 0), "EQ"));
  return {hlo::select(lt(x, 0), hlo::neg(r), hlo::select(keep, x, r))};
}

TPU_LOWERING(acosh) {
  Value x = float_self(ctx);
  if (hlo::is_complex(x.element())) return {conj_symmetric("chlo.acosh", x)};
  // log1p(t + sqrt(t (t + 2))), t = x - 1; log(x) + ln 2 for huge x.
  Value t = hlo::sub(x, hlo::full_like(x, 1));
  Value r = un("log_plus_one", hlo::add(t, un("sqrt", hlo::mul(t, hlo::add(t, hlo::full_like(t, 2))))));
  Value large = hlo::add(un("log", x), hlo::full_like(x, kLn2));
  r = hlo::select(lt(x, 1e18), r, large);
  return {hlo::select(lt(x, 1), hlo::full_like(x, std::numeric_limits<double>::quiet_NaN()), r)};
}

TPU_LOWERING(atanh) {
  Value x = float_self(ctx);
  if (hlo::is_complex(x.element())) return {un("chlo.atanh", x)};
  // 0.5 * log1p(2x / (1 - x))
  Value q = hlo::div(hlo::mul(hlo::full_like(x, 2), x), hlo::sub(hlo::full_like(x, 1), x));
  return {hlo::mul(hlo::full_like(x, 0.5), un("log_plus_one", q))};
}

// ---- integer-preserving -----------------------------------------------------

TPU_LOWERING(abs) {
  Value x = ctx.tensor("self");
  if (x.element() == ElementType::kPred) return {x};
  Value a = un("abs", x);
  if (!hlo::is_complex(x.element())) return {a};
  // |inf + nan i| is inf (C99 hypot); XLA's gives nan.
  Value inf = hlo::full_like(a, std::numeric_limits<double>::infinity());
  Value any_inf = or_(hlo::compare(un("abs", hlo::real(x)), inf, "EQ"), hlo::compare(un("abs", hlo::imag(x)), inf, "EQ"));
  return {hlo::select(any_inf, inf, a)};
}

TPU_LOWERING(floor) {
  Value x = ctx.tensor("self");
  return {hlo::is_float(x.element()) ? un("floor", x) : x};
}

TPU_LOWERING(ceil) {
  Value x = ctx.tensor("self");
  return {hlo::is_float(x.element()) ? un("ceil", x) : x};
}

TPU_LOWERING(trunc) {
  Value x = ctx.tensor("self");
  return {hlo::is_float(x.element()) ? ew::trunc(x) : x};
}
TPU_LOWERING_ALIAS(fix, trunc);

TPU_LOWERING(frac) {
  Value x = ctx.operand("self", opmath(ctx.dtype_of("self")));
  return {hlo::sub(x, ew::trunc(x))};
}

// round(self) and round.decimals(self, decimals): half to even.
TPU_LOWERING(round) {
  int64_t decimals = ctx.has("decimals") ? ctx.int_arg("decimals") : 0;
  Value x = ctx.tensor("self");
  if (!hlo::is_float(x.element())) return {x};
  if (decimals == 0) return {un("round_nearest_even", x)};
  x = hlo::convert(x, element_type(opmath(ctx.dtype_of("self"))));
  Value p = hlo::full_like(x, std::pow(10.0, static_cast<double>(decimals > 0 ? decimals : -decimals)));
  if (decimals > 0) return {hlo::div(un("round_nearest_even", hlo::mul(x, p)), p)};
  return {hlo::mul(un("round_nearest_even", hlo::div(x, p)), p)};
}

// sign(NaN) is 0 in PyTorch.
TPU_LOWERING(sign) {
  Value x = ctx.tensor("self");
  if (x.element() == ElementType::kPred) return {x};
  Value s = un("sign", x);  // complex: x / |x|, 0 at 0 (sgn)
  // 0 at NaN, and +0 at -0 as CPU's (0 < x) - (x < 0) gives (stablehlo.sign keeps -0).
  if (hlo::is_float(x.element()))
    s = hlo::select(or_(is_nan(x), hlo::compare(x, hlo::full_like(x, 0), "EQ")), hlo::full_like(x, 0), s);
  return {s};
}
TPU_LOWERING_ALIAS(sgn, sign);

TPU_LOWERING(signbit) {
  Value x = ctx.tensor("self");
  auto e = x.element();
  if (!hlo::is_float(e)) {
    if (!hlo::is_signed_int(e)) return {falses(ctx.b(), x)};
    return {lt(x, 0)};
  }
  return {sign_bit(x)};
}

TPU_LOWERING(isnan) {
  Value x = ctx.tensor("self");
  if (!is_inexact(x.element())) return {falses(ctx.b(), x)};
  return {is_nan(x)};
}

// nan_to_num(self, nan=0, posinf=max, neginf=lowest): float? arguments.
// Complex values: each part on its own, as CPU does.
TPU_LOWERING(nan_to_num) {
  Value x = ctx.tensor("self");
  if (!is_inexact(x.element())) return {x};
  auto t = ctx.dtype_of("self");
  if (at::isComplexType(t)) t = c10::toRealValueType(t);
  double nan = ctx.opt_float("nan").value_or(0.0);
  double posinf = ctx.opt_float("posinf").value_or(max_of(t));
  double neginf = ctx.opt_float("neginf").value_or(-max_of(t));
  auto fix = [&](Value v) {
    Value inf = hlo::full_like(v, std::numeric_limits<double>::infinity());
    Value r = hlo::select(hlo::compare(v, inf, "EQ"), hlo::full_like(v, posinf), v);
    r = hlo::select(hlo::compare(v, hlo::neg(inf), "EQ"), hlo::full_like(v, neginf), r);
    return hlo::select(is_nan(v), hlo::full_like(v, nan), r);
  };
  if (hlo::is_complex(x.element())) return {hlo::make_complex(fix(hlo::real(x)), fix(hlo::imag(x)))};
  return {fix(x)};
}

TPU_LOWERING(bitwise_not) { return {not_(ctx.tensor("self"))}; }

TPU_LOWERING(logical_not) {
  Value x = ctx.tensor("self");
  return {hlo::compare(x, hlo::full_like(x, 0), "EQ")};
}

// clamp(self, min?, max?) with Scalar or Tensor bounds; also clamp_min /
// clamp_max (which have just one of them). NaN propagates.
TPU_LOWERING(clamp) {
  auto dims = out_dims(ctx, {"self", "min", "max"});
  auto t = ctx.result_type({"self", "min", "max"});
  if (t == at::kBool) t = at::kInt;
  Value x = in(ctx, "self", t, dims);
  if (!ctx.is_none("min")) x = nan_max(x, in(ctx, "min", t, dims));
  if (!ctx.is_none("max")) x = nan_min(x, in(ctx, "max", t, dims));
  return {x};
}
TPU_LOWERING_ALIAS(clamp_min, clamp);
TPU_LOWERING_ALIAS(clamp_max, clamp);

// where(condition, self, other): self and other are tensors or Scalars.
TPU_LOWERING(where) {
  auto dims = out_dims(ctx, {"condition", "self", "other"});
  auto t = ctx.out_dtype().value_or(ctx.result_type({"self", "other"}));
  Value c = in(ctx, "condition", at::kBool, dims);
  return {hlo::select(c, in(ctx, "self", t, dims), in(ctx, "other", t, dims))};
}

// masked_fill(self, mask, value): value is a Scalar or a 0-dim tensor.
TPU_LOWERING(masked_fill) {
  Value x = ctx.tensor("self");
  auto t = ctx.dtype_of("self");
  auto dims = out_dims(ctx, {"self", "mask"});
  x = hlo::broadcast_to(x, dims);
  Value m = in(ctx, "mask", at::kBool, dims);
  return {hlo::select(m, in(ctx, "value", t, dims), x)};
}

}  // namespace torch_tpu::lowering
