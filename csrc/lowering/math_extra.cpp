// More elementwise and small composite math: heaviside, logaddexp(2),
// nextafter, gcd/lcm, frexp, ldexp, deg2rad/rad2deg, isinf & co, isin,
// angle, trace, addr, _add_relu, linalg_cross, renorm, native_norm, clone.
// Formulas follow PyTorch's CPU kernels; floats compute in the opmath type.
#include <c10/core/WrapDimMinimal.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "lowering/elementwise_util.h"

namespace torch_tpu::lowering {

using namespace ew;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kInf = std::numeric_limits<double>::infinity();

at::ScalarType arith_type(at::ScalarType t) { return t == at::kBool ? at::kInt : opmath(t); }
Value cmpc(Value a, double v, const char* dir) { return hlo::compare(a, hlo::full_like(a, v), dir); }
Value un(const char* op, Value x) { return hlo::unary(op, x); }

// Signed integer type of the same width as float type `e`.
ElementType bits_type(ElementType e) {
  switch (hlo::element_bits(e)) {
    case 16: return ElementType::kI16;
    case 32: return ElementType::kI32;
    default: return ElementType::kI64;
  }
}
Value int_full(Value like, int64_t v) {
  return hlo::broadcast_in_dim(hlo::constant_int(like.builder(), like.element(), v), like.dims(), {});
}

// Euclid's algorithm on |a|, |b|, unrolled: the worst case (consecutive
// Fibonacci numbers) takes fewer than 1.45 * bits steps.
Value gcd_values(Value a, Value b) {
  a = un("abs", a);
  b = un("abs", b);
  int steps = hlo::element_bits(a.element()) * 3 / 2 + 2;
  Value zero = hlo::full_like(a, 0), one = hlo::full_like(a, 1);
  for (int i = 0; i < steps; ++i) {
    // while (a != 0) { c = a; a = b % a; b = c; } return b;
    Value nz = hlo::compare(a, zero, "NE");
    Value r = hlo::binary("remainder", b, hlo::select(nz, a, one));
    Value na = hlo::select(nz, r, a);
    b = hlo::select(nz, a, b);
    a = na;
  }
  return b;
}

// Rounds a float32 value to bf16 precision (kept in float32) with integer
// arithmetic: XLA folds convert(convert(x, bf16), f32) away. Round to
// nearest even; NaN stays NaN. Other types: convert twice.
Value round_to(Value v, at::ScalarType t) {
  if (scalar_type(v.element()) == t) return v;
  if (t != at::kBFloat16 || v.element() != ElementType::kF32)
    return hlo::convert(hlo::convert(v, element_type(t)), v.element());
  Value bits = hlo::bitcast_convert(v, ElementType::kU32);
  auto u = [&](int64_t c) { return int_full(bits, c); };
  Value lsb = hlo::binary("and", hlo::binary("shift_right_logical", bits, u(16)), u(1));
  Value r = hlo::add(bits, hlo::add(u(0x7fff), lsb));
  r = hlo::binary("and", r, u(0xffff0000LL));
  return hlo::select(is_nan(v), v, hlo::bitcast_convert(r, ElementType::kF32));
}

// Sum over `dims` of x (already in the accumulation type).
Value sum(Value x, const Dims& dims) { return hlo::reduce(x, dims, hlo::ReduceKind::kSum); }

// The p-norm of |x| over `dims` with p a runtime value of x's type (rank 0):
// inf / -inf give max / min, 0 counts non-zeros, otherwise (sum a^p)^(1/p)
// (sqrt of the sum of squares for p = 2, like PyTorch).
Value pnorm(Value x, Value p, const Dims& dims) {
  Value a = un("abs", x);
  Dims rd;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) rd.push_back(a.dim(i));
  Value pa = hlo::broadcast_in_dim(p, a.dims(), {});
  Value pr = hlo::broadcast_in_dim(p, rd, {});
  Value nmax = hlo::reduce(a, dims, hlo::ReduceKind::kMax);
  Value nmin = hlo::reduce(a, dims, hlo::ReduceKind::kMin);
  Value count = sum(hlo::select(cmpc(a, 0, "NE"), hlo::full_like(a, 1), hlo::full_like(a, 0)), dims);
  // NaN propagates through max/min like PyTorch's norm.
  Value any_nan = hlo::reduce(is_nan(a), dims, hlo::ReduceKind::kOr);
  Value nan = hlo::full_like(nmax, std::numeric_limits<double>::quiet_NaN());
  nmax = hlo::select(any_nan, nan, nmax);
  nmin = hlo::select(any_nan, nan, nmin);
  Value l1 = sum(a, dims);
  Value l2 = un("sqrt", sum(hlo::mul(a, a), dims));
  Value lp = hlo::binary("power", sum(hlo::binary("power", a, pa), dims), hlo::div(hlo::full_like(pr, 1), pr));
  Value r = lp;
  r = hlo::select(cmpc(pr, 2, "EQ"), l2, r);
  r = hlo::select(cmpc(pr, 1, "EQ"), l1, r);
  r = hlo::select(cmpc(pr, 0, "EQ"), count, r);
  r = hlo::select(cmpc(pr, kInf, "EQ"), nmax, r);
  r = hlo::select(cmpc(pr, -kInf, "EQ"), nmin, r);
  return r;
}

}  // namespace

// heaviside(self, values): values where self == 0, else self > 0 (NaN -> 0).
TPU_LOWERING(heaviside) {
  auto dims = out_dims(ctx, {"self", "values"});
  auto ct = arith_type(ctx.result_type({"self", "values"}));
  Value x = in(ctx, "self", ct, dims), v = in(ctx, "values", ct, dims);
  Value pos = hlo::select(cmpc(x, 0, "GT"), hlo::full_like(x, 1), hlo::full_like(x, 0));
  return {hlo::select(cmpc(x, 0, "EQ"), v, pos)};
}

// logaddexp(a, b) = max + log1p(exp(-|a - b|)); a where a == b is infinite.
TPU_LOWERING(logaddexp) {
  auto dims = out_dims(ctx, {"self", "other"});
  require_floating(ctx, ctx.result_type({"self", "other"}), /*complex_ok=*/true);
  auto ct = opmath(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  if (hlo::is_complex(a.element())) {
    // CPU's complex form: the larger real part is m, log1p(exp(other - m)).
    Value a_big = hlo::compare(hlo::real(a), hlo::real(b), "GE");
    Value m = hlo::select(a_big, a, b), lo = hlo::select(a_big, b, a);
    return {hlo::add(m, un("log_plus_one", un("exponential", hlo::sub(lo, m))))};
  }
  Value m = hlo::max(a, b);
  Value r = hlo::add(m, un("log_plus_one", un("exponential", hlo::neg(un("abs", hlo::sub(a, b))))));
  Value inf_eq = and_(cmpc(un("abs", a), kInf, "EQ"), hlo::compare(a, b, "EQ"));
  return {hlo::select(inf_eq, a, r)};
}

// logaddexp2(a, b) = max + log1p(2^-|a - b|) / ln 2.
TPU_LOWERING(logaddexp2) {
  auto dims = out_dims(ctx, {"self", "other"});
  require_floating(ctx, ctx.result_type({"self", "other"}));
  auto ct = opmath(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  Value m = hlo::max(a, b);
  Value d = hlo::neg(un("abs", hlo::sub(a, b)));
  Value p2 = un("exponential", hlo::mul(d, hlo::full_like(d, kLn2)));
  Value r = hlo::add(m, hlo::mul(un("log_plus_one", p2), hlo::full_like(m, 1 / kLn2)));
  Value inf_eq = and_(cmpc(un("abs", a), kInf, "EQ"), hlo::compare(a, b, "EQ"));
  return {hlo::select(inf_eq, a, r)};
}

// nextafter(self, other): the next representable value of self's type
// towards other, by stepping the bit pattern.
TPU_LOWERING(nextafter) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = ctx.result_type({"self", "other"});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"nextafter_cpu\" not implemented for '", c10::toString(t), "'");
  Value a = in(ctx, "self", t, dims), b = in(ctx, "other", t, dims);
  ElementType ie = bits_type(a.element());
  Value bits = hlo::bitcast_convert(a, ie);
  Value up = hlo::compare(hlo::compare(b, a, "GT"), cmpc(a, 0, "GT"), "EQ");
  Value stepped = hlo::select(up, hlo::add(bits, int_full(bits, 1)), hlo::sub(bits, int_full(bits, 1)));
  Value r = hlo::bitcast_convert(stepped, a.element());
  // From zero: the smallest subnormal with b's sign.
  Value tiny = hlo::bitcast_convert(int_full(bits, 1), a.element());
  r = hlo::select(cmpc(a, 0, "EQ"), hlo::select(cmpc(b, 0, "LT"), hlo::neg(tiny), tiny), r);
  r = hlo::select(hlo::compare(a, b, "EQ"), b, r);
  return {hlo::select(or_(is_nan(a), is_nan(b)), hlo::add(a, b), r)};
}

TPU_LOWERING(gcd) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = ctx.result_type({"self", "other"});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(t, /*includeBool=*/false), "\"gcd_cpu\" not implemented for '", c10::toString(t), "'");
  return {gcd_values(in(ctx, "self", t, dims), in(ctx, "other", t, dims))};
}

// lcm(a, b) = |a / gcd * b|, 0 when gcd is 0.
TPU_LOWERING(lcm) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = ctx.result_type({"self", "other"});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(t, /*includeBool=*/false), "\"lcm_cpu\" not implemented for '", c10::toString(t), "'");
  Value a = in(ctx, "self", t, dims), b = in(ctx, "other", t, dims);
  Value g = gcd_values(a, b);
  Value zero = cmpc(g, 0, "EQ");
  Value q = hlo::div(a, hlo::select(zero, hlo::full_like(g, 1), g));
  // C++ promotes 8- and 16-bit integers to int: CPU's product and abs are
  // taken in int32 and only then wrap to the type (lcm(2, 127) in int8 is
  // abs(254) = 254 -> -2, not abs(-2) = 2)
  bool narrow = t == at::kByte || t == at::kChar || t == at::kShort;
  Value prod = narrow ? hlo::mul(hlo::convert(q, ElementType::kI32), hlo::convert(b, ElementType::kI32)) : hlo::mul(q, b);
  Value r = un("abs", prod);
  if (narrow) r = hlo::convert(r, a.element());
  return {hlo::select(zero, hlo::full_like(g, 0), r)};
}

// frexp(self) -> (mantissa in [0.5, 1), int32 exponent), in integer
// arithmetic on the bits (XLA:CPU flushes subnormals in float arithmetic):
// subnormals are normalised with a leading-zero count; 0, inf and NaN give
// (self, 0).
TPU_LOWERING(frexp) {
  auto t = ctx.dtype_of("self");
  TORCH_CHECK(at::isFloatingType(t), "torch.frexp() only supports floating-point dtypes");
  bool dbl = t == at::kDouble;
  Value x = ctx.operand("self", dbl ? at::kDouble : at::kFloat);
  ElementType ie = dbl ? ElementType::kI64 : ElementType::kI32;
  int width = dbl ? 64 : 32, mbits = dbl ? 52 : 23;
  int64_t emask = dbl ? 0x7ff : 0xff, bias = dbl ? 1022 : 126;
  int64_t frac_mask = (int64_t{1} << mbits) - 1;
  Value bits = hlo::bitcast_convert(x, ie);
  auto band = [&](Value v, int64_t m) { return hlo::binary("and", v, int_full(v, m)); };
  Value field = band(hlo::binary("shift_right_logical", bits, int_full(bits, mbits)), emask);
  Value frac = band(bits, frac_mask);
  Value sign = hlo::binary("and", bits, int_full(bits, dbl ? std::numeric_limits<int64_t>::min() : INT32_MIN));
  // Normal numbers: the exponent field rebiased; the fraction kept.
  Value e = hlo::sub(field, int_full(field, bias));
  // Subnormals: value = frac * 2^-(bias + mbits); its top bit k =
  // width - 1 - clz(frac) moves to the implicit bit.
  Value lz = un("count_leading_zeros", frac);
  Value sub_e = hlo::sub(int_full(lz, width - (bias + mbits)), lz);
  Value shift = hlo::sub(lz, int_full(lz, width - 1 - mbits));
  Value sub_frac = band(hlo::binary("shift_left", frac, shift), frac_mask);
  Value is_sub = and_(cmpc(field, 0, "EQ"), cmpc(frac, 0, "NE"));
  e = hlo::select(is_sub, sub_e, e);
  frac = hlo::select(is_sub, sub_frac, frac);
  Value mant_bits = hlo::binary("or", hlo::binary("or", sign, frac), int_full(bits, bias << mbits));
  Value m = hlo::bitcast_convert(mant_bits, x.element());
  Value special = or_(and_(cmpc(field, 0, "EQ"), cmpc(frac, 0, "EQ")), cmpc(field, emask, "EQ"));
  m = hlo::select(special, x, m);
  e = hlo::select(special, hlo::full_like(e, 0), e);
  return {m, hlo::convert(e, ElementType::kI32)};
}

// ldexp(self, other) = self * 2^other.
TPU_LOWERING(ldexp) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = opmath(ctx.out_dtype().value_or(float_type(ctx.result_type({"self", "other"}))));
  Value x = in(ctx, "self", ct, dims), e = in(ctx, "other", ct, dims);
  return {hlo::mul(x, hlo::binary("power", hlo::full_like(e, 2), e))};
}

TPU_LOWERING(deg2rad) {
  Value x = ctx.operand("self", opmath(float_type(ctx.dtype_of("self"))));
  return {hlo::mul(x, hlo::full_like(x, kPi / 180))};
}

TPU_LOWERING(rad2deg) {
  Value x = ctx.operand("self", opmath(float_type(ctx.dtype_of("self"))));
  return {hlo::mul(x, hlo::full_like(x, 180 / kPi))};
}

// A complex value is infinite where either part is.
TPU_LOWERING(isinf) {
  Value x = ctx.tensor("self");
  if (hlo::is_complex(x.element()))
    return {or_(cmpc(un("abs", hlo::real(x)), kInf, "EQ"), cmpc(un("abs", hlo::imag(x)), kInf, "EQ"))};
  if (!hlo::is_float(x.element())) return {falses(ctx.b(), x)};
  return {cmpc(un("abs", x), kInf, "EQ")};
}

TPU_LOWERING(isposinf) {
  Value x = ctx.tensor("self");
  if (!hlo::is_float(x.element())) return {falses(ctx.b(), x)};
  return {cmpc(x, kInf, "EQ")};
}

TPU_LOWERING(isneginf) {
  Value x = ctx.tensor("self");
  if (!hlo::is_float(x.element())) return {falses(ctx.b(), x)};
  return {cmpc(x, -kInf, "EQ")};
}

// isin(elements, test_elements, assume_unique, invert): each element
// compared with every test element (in the promoted type).
TPU_LOWERING(isin) {
  const char* en = ctx.has("elements") ? "elements" : "element";
  const char* tn = ctx.has("test_elements") ? "test_elements" : "test_element";
  auto t = ctx.result_type({en, tn});
  Value e = ctx.operand(en, t), s = ctx.operand(tn, t);
  bool invert = ctx.bool_arg("invert");
  int64_t n = s.type().numel();
  if (n == 0) return {hlo::full(ctx.b(), ElementType::kPred, e.dims(), invert ? 1 : 0)};
  s = hlo::reshape(s, {n});
  int64_t r = e.rank();
  Dims big = e.dims();
  big.push_back(n);
  Dims edims(r);
  for (int64_t i = 0; i < r; ++i) edims[i] = i;
  Value eq = hlo::compare(hlo::broadcast_in_dim(e, big, edims), hlo::broadcast_in_dim(s, big, {r}), "EQ");
  Value found = hlo::reduce(eq, {r}, hlo::ReduceKind::kOr);
  return {invert ? not_(found) : found};
}

// angle of a real number: pi for negatives, 0 otherwise, NaN kept; of a
// complex one, atan2(imag, real).
TPU_LOWERING(angle) {
  Value x = ctx.operand("self", opmath(float_type(ctx.dtype_of("self"))));
  if (hlo::is_complex(x.element())) return {hlo::binary("atan2", hlo::imag(x), hlo::real(x))};
  Value r = hlo::select(cmpc(x, 0, "LT"), hlo::full_like(x, kPi), hlo::full_like(x, 0));
  return {hlo::select(is_nan(x), x, r)};
}

// trace of a matrix: the sum of its diagonal in the sum's dtype (int64 for
// integers and bool).
TPU_LOWERING(trace) {
  auto t = ctx.dtype_of("self");
  auto out = ctx.out_dtype().value_or(at::isIntegralType(t, true) ? at::kLong : t);
  Value x = ctx.operand("self", opmath(out));
  TORCH_CHECK(x.rank() == 2, "trace: expected a matrix, but got tensor with dim ", x.rank());
  Value diag = hlo::compare(hlo::iota(ctx.b(), ElementType::kI64, x.dims(), 0),
                            hlo::iota(ctx.b(), ElementType::kI64, x.dims(), 1), "EQ");
  return {sum(hlo::select(diag, x, hlo::full_like(x, 0)), {0, 1})};
}

// addr(self, vec1, vec2, beta, alpha) = beta * self + alpha * outer(vec1,
// vec2); beta == 0 ignores self (NaN included).
TPU_LOWERING(addr) {
  // bf16/f16 round after every operation, like CPU's kernel: computed in
  // float32 with explicit roundings.
  auto out = ctx.out_dtype().value_or(ctx.result_type({"self", "vec1", "vec2"}));
  auto ct = arith_type(out);
  auto rnd = [&](Value v) { return round_to(v, out); };
  Value v1 = ctx.operand("vec1", ct), v2 = ctx.operand("vec2", ct);
  TORCH_CHECK(v1.rank() == 1 && v2.rank() == 1, "addr: Expected 1-D argument vec1 and vec2, but got ", v1.rank(),
              "-D and ", v2.rank(), "-D");
  Dims dims{v1.dim(0), v2.dim(0)};
  Value alpha = rnd(in(ctx, "alpha", ct, dims)), beta = rnd(in(ctx, "beta", ct, dims));
  Value prod = rnd(hlo::mul(alpha, hlo::broadcast_in_dim(v1, dims, {0})));
  prod = rnd(hlo::mul(prod, hlo::broadcast_in_dim(v2, dims, {1})));
  Value self = rnd(hlo::mul(in(ctx, "self", ct, dims), beta));
  self = hlo::select(cmpc(beta, 0, "EQ"), hlo::full_like(self, 0), self);
  return {hlo::add(self, prod)};
}

// _add_relu(self, other, alpha) = relu(self + alpha * other).
TPU_LOWERING(_add_relu) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  Value s = hlo::add(a, hlo::mul(b, in(ctx, "alpha", ct, dims)));
  return {nan_max(s, hlo::full_like(s, 0))};
}

// linalg_cross(self, other, dim): broadcast, then the usual component
// formula (in the result dtype: bf16 rounds after every operation as on CPU).
TPU_LOWERING(linalg_cross) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = ctx.out_dtype().value_or(ctx.result_type({"self", "other"}));
  if (ct == at::kBool) ct = at::kInt;
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  int64_t r = static_cast<int64_t>(dims.size());
  int64_t d = c10::maybe_wrap_dim(ctx.int_arg("dim"), r);
  TORCH_CHECK(dims[d] == 3, "linalg.cross: inputs dimension ", d, " must have length 3. Got ", dims[d], " and ",
              dims[d]);
  auto comp = [&](Value v, int64_t i) {
    Dims start(r, 0), limit = dims;
    start[d] = i;
    limit[d] = i + 1;
    return hlo::slice(v, start, limit);
  };
  Value a0 = comp(a, 0), a1 = comp(a, 1), a2 = comp(a, 2), b0 = comp(b, 0), b1 = comp(b, 1), b2 = comp(b, 2);
  Value c0 = hlo::sub(hlo::mul(a1, b2), hlo::mul(a2, b1));
  Value c1 = hlo::sub(hlo::mul(a2, b0), hlo::mul(a0, b2));
  Value c2 = hlo::sub(hlo::mul(a0, b1), hlo::mul(a1, b0));
  return {hlo::concatenate({c0, c1, c2}, d)};
}

// renorm(self, p, dim, maxnorm): every slice along `dim` whose p-norm
// exceeds maxnorm is scaled by maxnorm / (norm + 1e-7).
TPU_LOWERING(renorm) {
  auto t = ctx.dtype_of("self");
  auto ct = opmath(t);
  Value x = ctx.operand("self", ct);
  int64_t r = x.rank();
  int64_t d = c10::maybe_wrap_dim(ctx.int_arg("dim"), r);
  Dims rdims;
  for (int64_t i = 0; i < r; ++i)
    if (i != d) rdims.push_back(i);
  auto rt = c10::toRealValueType(ct);  // norms of complex rows are real
  Value norm = pnorm(x, ctx.operand("p", rt), rdims);  // 1-D (or rank 0 for 0-dim self)
  Value maxnorm = hlo::broadcast_in_dim(ctx.operand("maxnorm", rt), norm.dims(), {});
  Value factor = hlo::select(hlo::compare(norm, maxnorm, "GT"),
                             hlo::div(maxnorm, hlo::add(norm, hlo::full_like(norm, 1e-7))), hlo::full_like(norm, 1));
  if (ct != t) factor = hlo::convert(hlo::convert(factor, element_type(t)), element_type(ct));
  Dims keep = r == 0 ? Dims{} : Dims{d};
  return {hlo::mul(x, hlo::broadcast_in_dim(hlo::convert(factor, x.element()), x.dims(), keep))};
}

// native_norm(self, p) and native_norm(self, p?, dim, keepdim, dtype): the
// p-norm over `dim` (everything for the first form).
TPU_LOWERING(native_norm) {
  auto t = ctx.dtype_of("self");
  at::ScalarType out = t;
  if (auto d = ctx.has("dtype") ? ctx.opt_dtype("dtype") : std::nullopt) out = *d;
  out = ctx.out_dtype().value_or(out);
  auto ct = opmath(out);
  Value x = ctx.operand("self", ct);
  int64_t r = x.rank();
  Dims rdims;
  bool keepdim = ctx.has("keepdim") && ctx.bool_arg("keepdim");
  if (ctx.has("dim")) {
    for (auto v : ctx.ints_arg("dim")) rdims.push_back(c10::maybe_wrap_dim(v, r));
  }
  if (rdims.empty())
    for (int64_t i = 0; i < r; ++i) rdims.push_back(i);
  Value p = ctx.is_none("p") ? hlo::constant(ctx.b(), element_type(ct), 2) : ctx.operand("p", ct);
  Value n = pnorm(x, p, rdims);
  if (keepdim) {
    Dims kd = x.dims();
    for (auto v : rdims) kd[v] = 1;
    n = hlo::reshape(n, kd);
  }
  return {n};
}

TPU_LOWERING(clone) { return {ctx.tensor("self")}; }

}  // namespace torch_tpu::lowering
