// Binary elementwise arithmetic: add, sub, mul, div, remainder, pow, ...
// Each rule computes in PyTorch's promoted type (through float32 for
// bf16/f16, as PyTorch's CPU kernels do) and returns a value the execution
// layer converts to the output's dtype and shape.
#include <limits>
#include <string>

#include "lowering/elementwise_util.h"
#include "lowering/index_check.h"

namespace torch_tpu::lowering {

using namespace ew;

namespace {

// Arithmetic on bool goes through int32 (add = or, mul = and once the
// result is converted back to bool).
at::ScalarType arith_type(at::ScalarType t) { return t == at::kBool ? at::kInt : opmath(t); }

Value lt0(Value x) { return hlo::compare(x, hlo::full_like(x, 0), "LT"); }
Value ne0(Value x) { return hlo::compare(x, hlo::full_like(x, 0), "NE"); }
Value ne(Value a, Value b) { return hlo::compare(a, b, "NE"); }

// Python-style floor division of a by b (same type, same shape).
Value floor_div(Value a, Value b) {
  if (!hlo::is_float(a.element())) {
    Value q = hlo::div(a, b), r = hlo::binary("remainder", a, b);
    Value adjust = and_(ne0(r), ne(lt0(r), lt0(b)));
    return hlo::select(adjust, hlo::sub(q, hlo::full_like(q, 1)), q);
  }
  // c10::div_floor_floating.
  Value mod = hlo::binary("remainder", a, b);
  Value div = hlo::div(hlo::sub(a, mod), b);
  div = hlo::select(and_(ne0(mod), ne(lt0(b), lt0(mod))), hlo::sub(div, hlo::full_like(div, 1)), div);
  Value fl = hlo::unary("floor", div);
  fl = hlo::select(hlo::compare(hlo::sub(div, fl), hlo::full_like(div, 0.5), "GT"), hlo::add(fl, hlo::full_like(fl, 1)), fl);
  Value q = hlo::div(a, b);
  Value signed_zero = hlo::mul(q, hlo::full_like(q, 0));  // copysign(0, a / b)
  Value r = hlo::select(ne0(div), fl, signed_zero);
  return hlo::select(hlo::compare(b, hlo::full_like(b, 0), "EQ"), q, r);
}

// Python-style modulus (sign of the divisor).
Value py_remainder(Value a, Value b) {
  Value mod = hlo::binary("remainder", a, b);
  Value adjust = and_(ne0(mod), ne(lt0(b), lt0(mod)));
  return hlo::select(adjust, hlo::add(mod, b), mod);
}

// CPU's and CUDA's mul and div kernels read a 0-dim second operand unrounded
// (TensorIterator's original_scalar_value), unlike other binary ops (ew::in).
bool rounds_other(LowerCtx& ctx) { return !(ctx.is_tensor("other") && ctx.tensor_arg("other").dim() == 0); }

std::vector<Value> div_impl(LowerCtx& ctx, const std::string& mode) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto t = ctx.result_type({"self", "other"});
  if (mode.empty()) t = float_type(t);
  if (!mode.empty()) require_real(ctx, t, /*bool_ok=*/false);
  auto ct = arith_type(t);
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims, rounds_other(ctx));
  if (mode.empty()) return {hlo::div(a, b)};
  check_nonzero(ctx, b);  // integer division by zero raises, as on CPU (index_check.h)
  if (mode == "trunc") {
    Value q = hlo::div(a, b);  // integer division truncates
    if (!hlo::is_float(q.element())) return {q};
    // CPU rounds a bf16/f16 quotient to its type before truncating.
    if (ct != t) q = round_through(q, t);
    return {trunc(q)};
  }
  TORCH_CHECK(mode == "floor", ctx.op_name(), ": rounding_mode must be None, 'trunc' or 'floor', got '", mode, "'");
  return {floor_div(a, b)};
}

}  // namespace

TPU_LOWERING(add) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  if (ctx.has("alpha")) b = hlo::mul(b, in(ctx, "alpha", ct, dims));
  return {hlo::add(a, b)};
}

TPU_LOWERING(sub) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  if (ctx.has("alpha")) b = hlo::mul(b, in(ctx, "alpha", ct, dims));
  return {hlo::sub(a, b)};
}

// rsub(self, other, alpha) = other - alpha * self
TPU_LOWERING(rsub) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  if (ctx.has("alpha")) a = hlo::mul(a, in(ctx, "alpha", ct, dims));
  return {hlo::sub(b, a)};
}

TPU_LOWERING(mul) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  return {hlo::mul(in(ctx, "self", ct, dims), in(ctx, "other", ct, dims, rounds_other(ctx)))};
}

TPU_LOWERING(div) {
  std::string mode = ctx.is_none("rounding_mode") ? "" : ctx.str_arg("rounding_mode");
  return div_impl(ctx, mode);
}

TPU_LOWERING(floor_divide) { return div_impl(ctx, "floor"); }

TPU_LOWERING(remainder) {
  auto dims = out_dims(ctx, {"self", "other"});
  require_real(ctx, ctx.result_type({"self", "other"}), /*bool_ok=*/false);
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value b = in(ctx, "other", ct, dims);
  check_nonzero(ctx, b);
  return {py_remainder(in(ctx, "self", ct, dims), b)};
}

TPU_LOWERING(fmod) {
  auto dims = out_dims(ctx, {"self", "other"});
  require_real(ctx, ctx.result_type({"self", "other"}), /*bool_ok=*/false);
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value b = in(ctx, "other", ct, dims);
  check_nonzero(ctx, b);
  return {hlo::binary("remainder", in(ctx, "self", ct, dims), b)};
}

namespace {

// Integer a^e (e >= 0) by squaring in uint64, whose multiply wraps mod
// 2^64 and so, after narrowing, mod 2^k: CPU's powi result. XLA's integer
// power multiplies in the signed type, whose overflow its LLVM code treats
// as undefined (55^127 in int64 gave 8238111181504701561 for CPU's
// 5131385751627792775), and reads an unsigned exponent as signed (uint8
// 249 as -7). One unrolled step per exponent bit.
Value int_power(Value a, Value e) {
  const ElementType t = a.element();
  auto as_u64 = [](Value v) {
    if (v.element() == ElementType::kU64) return v;
    if (hlo::is_unsigned_int(v.element())) return hlo::convert(v, ElementType::kU64);
    return hlo::bitcast_convert(hlo::convert(v, ElementType::kI64), ElementType::kU64);
  };
  Value base = as_u64(a), ex = as_u64(e);
  Value one = hlo::full_like(base, 1), zero = hlo::full_like(base, 0);
  Value r = one;
  const int bits = hlo::element_bits(t);
  for (int i = 0; i < bits; ++i) {
    Value bit = hlo::binary("and", hlo::binary("shift_right_logical", ex, hlo::full_like(ex, i)), one);
    r = hlo::select(hlo::compare(bit, zero, "NE"), hlo::mul(r, base), r);
    if (i + 1 < bits) base = hlo::mul(base, base);
  }
  if (t == ElementType::kU64) return r;
  if (hlo::is_unsigned_int(t)) return hlo::convert(r, t);
  return hlo::convert(hlo::bitcast_convert(r, ElementType::kI64), t);
}

}  // namespace

// pow.Tensor_Tensor(self, exponent), pow.Tensor_Scalar, pow.Scalar(self: Scalar, exponent).
TPU_LOWERING(pow) {
  auto dims = out_dims(ctx, {"self", "exponent"});
  auto t = ctx.result_type({"self", "exponent"});
  auto ct = arith_type(t);
  Value a = in(ctx, "self", ct, dims), e = in(ctx, "exponent", ct, dims);
  // Unsigned operands already hold the result type's values (an int64
  // 0-dim -7 became 249, as CPU casts it): no negative powers.
  if (hlo::is_unsigned_int(a.element())) return {int_power(a, e)};
  const bool integral = !is_inexact(a.element()) && a.element() != ElementType::kPred;
  Value p = integral ? int_power(a, e) : hlo::binary("power", a, e);
  if (hlo::is_complex(p.element())) {
    // XLA computes 0^z as exp(z log 0): NaN. CPU's 0^z is 0 when Re z > 0.
    Value zero_base = hlo::compare(a, hlo::full_like(a, 0), "EQ");
    Value re = hlo::real(e);
    Value positive = hlo::compare(re, hlo::full_like(re, 0), "GT");
    p = hlo::select(and_(zero_base, positive), hlo::full_like(p, 0), p);
  }
  if (is_inexact(p.element()) && !ctx.is_tensor("exponent")) {
    // CPU's (and CUDA's) kernels compute Scalar exponents 2, 3, -1, -2, 0.5
    // and -0.5 as products, reciprocals and sqrt/rsqrt: exact where power is
    // not ((1+2i)^2 = -3+4i), and sqrt's signs at -0 and -inf (sqrt(-0) = -0,
    // pow(-0, 0.5) = +0). The exponent is a runtime operand: selects.
    auto is = [&](double v) { return hlo::compare(e, hlo::full_like(e, v), "EQ"); };
    Value one = hlo::full_like(a, 1), sq = hlo::mul(a, a);
    Value root = principal_sqrt(a);
    p = hlo::select(is(2), sq, hlo::select(is(3), hlo::mul(sq, a), hlo::select(is(-1), hlo::div(one, a),
        hlo::select(is(-2), hlo::div(one, sq), hlo::select(is(0.5), root, hlo::select(is(-0.5), hlo::div(one, root), p))))));
  }
  if (is_inexact(p.element())) return {p};
  // Integers to negative powers: 1 -> 1, -1 -> +-1, others -> 0 (PyTorch's powi).
  Value one = hlo::full_like(a, 1), minus_one = hlo::full_like(a, -1), zero = hlo::full_like(a, 0);
  Value odd = ne0(hlo::binary("remainder", e, hlo::full_like(e, 2)));
  Value neg_pow = hlo::select(hlo::compare(a, one, "EQ"), one,
                              hlo::select(hlo::compare(a, minus_one, "EQ"), hlo::select(odd, minus_one, one), zero));
  return {hlo::select(lt0(e), neg_pow, p)};
}

// float_power computes in double, complex double for complex arguments.
TPU_LOWERING(float_power) {
  auto dims = out_dims(ctx, {"self", "exponent"});
  auto ct = at::isComplexType(ctx.result_type({"self", "exponent"})) ? at::kComplexDouble : at::kDouble;
  Value a = in(ctx, "self", ct, dims), e = in(ctx, "exponent", ct, dims);
  return {hlo::binary("power", a, e)};
}

TPU_LOWERING(maximum) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  return {nan_max(in(ctx, "self", ct, dims), in(ctx, "other", ct, dims))};
}

TPU_LOWERING(minimum) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  return {nan_min(in(ctx, "self", ct, dims), in(ctx, "other", ct, dims))};
}

// fmax / fmin ignore NaN unless both are NaN.
TPU_LOWERING(fmax) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  Value m = hlo::max(a, b);
  if (!hlo::is_float(m.element())) return {m};
  return {hlo::select(is_nan(a), b, hlo::select(is_nan(b), a, m))};
}

TPU_LOWERING(fmin) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = arith_type(ctx.result_type({"self", "other"}));
  Value a = in(ctx, "self", ct, dims), b = in(ctx, "other", ct, dims);
  Value m = hlo::min(a, b);
  if (!hlo::is_float(m.element())) return {m};
  return {hlo::select(is_nan(a), b, hlo::select(is_nan(b), a, m))};
}

TPU_LOWERING(atan2) {
  auto dims = out_dims(ctx, {"self", "other"});
  require_real(ctx, ctx.result_type({"self", "other"}));
  auto ct = opmath(float_type(ctx.result_type({"self", "other"})));
  return {hlo::binary("atan2", in(ctx, "self", ct, dims), in(ctx, "other", ct, dims))};
}

TPU_LOWERING(hypot) {
  auto dims = out_dims(ctx, {"self", "other"});
  require_floating(ctx, ctx.result_type({"self", "other"}));
  auto ct = opmath(ctx.result_type({"self", "other"}));
  Value a = hlo::unary("abs", in(ctx, "self", ct, dims)), b = hlo::unary("abs", in(ctx, "other", ct, dims));
  // max * sqrt(1 + (min/max)^2) avoids overflow; inf wins over nan.
  Value hi = hlo::max(a, b), lo = hlo::min(a, b);
  Value r = hlo::div(lo, hi);
  Value h = hlo::mul(hi, hlo::unary("sqrt", hlo::add(hlo::full_like(r, 1), hlo::mul(r, r))));
  h = hlo::select(hlo::compare(hi, hlo::full_like(hi, 0), "EQ"), hlo::full_like(h, 0), h);
  Value inf = hlo::full_like(h, std::numeric_limits<double>::infinity());
  h = hlo::select(or_(hlo::compare(a, inf, "EQ"), hlo::compare(b, inf, "EQ")), inf, h);
  return {h};
}

// xlogy(self, other) = self * log(other), 0 where self == 0, NaN where other is NaN.
TPU_LOWERING(xlogy) {
  auto dims = out_dims(ctx, {"self", "other"});
  require_real(ctx, ctx.result_type({"self", "other"}));
  auto t = float_type(ctx.result_type({"self", "other"})), ct = opmath(t);
  Value x = in(ctx, "self", ct, dims), y = in(ctx, "other", ct, dims);
  // CPU and CUDA compute bf16/f16 xlogy in that type: log(y) is rounded
  // before the product.
  Value log_y = hlo::unary("log", y);
  if (ct != t) log_y = round_through(log_y, t);
  Value r = hlo::mul(x, log_y);
  r = hlo::select(hlo::compare(x, hlo::full_like(x, 0), "EQ"), hlo::full_like(x, 0), r);
  return {hlo::select(is_nan(y), y, r)};
}

TPU_LOWERING(copysign) {
  auto dims = out_dims(ctx, {"self", "other"});
  auto ct = opmath(float_type(ctx.result_type({"self", "other"})));
  Value a = hlo::unary("abs", in(ctx, "self", ct, dims)), b = in(ctx, "other", ct, dims);
  return {hlo::select(sign_bit(b), hlo::neg(a), a)};  // -0.0 and NaN signs included
}

// addcmul(self, tensor1, tensor2, value) = self + value * tensor1 * tensor2
TPU_LOWERING(addcmul) {
  auto dims = out_dims(ctx, {"self", "tensor1", "tensor2"});
  auto ct = arith_type(ctx.result_type({"self", "tensor1", "tensor2"}));
  Value s = in(ctx, "self", ct, dims), t1 = in(ctx, "tensor1", ct, dims), t2 = in(ctx, "tensor2", ct, dims);
  return {hlo::add(s, hlo::mul(hlo::mul(in(ctx, "value", ct, dims), t1), t2))};
}

// addcdiv(self, tensor1, tensor2, value) = self + value * tensor1 / tensor2
TPU_LOWERING(addcdiv) {
  auto dims = out_dims(ctx, {"self", "tensor1", "tensor2"});
  auto ct = arith_type(ctx.result_type({"self", "tensor1", "tensor2"}));
  Value s = in(ctx, "self", ct, dims), t1 = in(ctx, "tensor1", ct, dims), t2 = in(ctx, "tensor2", ct, dims);
  return {hlo::add(s, hlo::div(hlo::mul(in(ctx, "value", ct, dims), t1), t2))};
}

// lerp(self, end, weight), PyTorch's two-sided formula for accuracy near w=1.
TPU_LOWERING(lerp) {
  auto dims = out_dims(ctx, {"self", "end", "weight"});
  require_floating(ctx, ctx.result_type({"self", "end"}), /*complex_ok=*/true);
  auto ct = opmath(ctx.result_type({"self", "end"}));
  Value s = in(ctx, "self", ct, dims), e = in(ctx, "end", ct, dims), w = in(ctx, "weight", ct, dims);
  Value diff = hlo::sub(e, s);
  Value lo = hlo::add(s, hlo::mul(w, diff));
  Value hi = hlo::sub(e, hlo::mul(diff, hlo::sub(hlo::full_like(w, 1), w)));
  Value aw = hlo::unary("abs", w);  // real for a complex weight
  return {hlo::select(hlo::compare(aw, hlo::full_like(aw, 0.5), "LT"), lo, hi)};
}

TPU_LOWERING(neg) {
  Value x = ctx.tensor("self");
  return {hlo::neg(x)};
}

TPU_LOWERING(reciprocal) {
  auto ct = opmath(float_type(ctx.dtype_of("self")));
  Value x = ctx.operand("self", ct);
  return {hlo::div(hlo::full_like(x, 1), x)};
}

}  // namespace torch_tpu::lowering
