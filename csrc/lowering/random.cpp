// Random ops: uniform_, normal, bernoulli, random_, exponential_, geometric_,
// log_normal_, cauchy_, randperm. Bits come from StableHLO's
// rng_bit_generator (ThreeFry) keyed by the op's generator; floats are built
// from mantissa bits, normals by Box-Muller.
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "lowering/elementwise_util.h"
#include "lowering/index_check.h"
#include "lowering/random_util.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

Value u_const(Builder& b, ElementType e, const Dims& dims, uint64_t v) {
  return hlo::broadcast_in_dim(hlo::constant_int(b, e, static_cast<int64_t>(v)), dims, {});
}


Dims out_dims(LowerCtx& ctx) {
  auto s = ctx.out_sizes(0);
  if (s) return *s;
  return ctx.tensor_arg("self").sizes().vec();
}

at::ScalarType out_type(LowerCtx& ctx) {
  auto t = ctx.out_dtype(0);
  if (t) return *t;
  return ctx.tensor_arg("self").scalar_type();
}

// A distribution's Scalar parameter (from, to, lambd, ...) as a runtime
// operand of the compute type, broadcast to the output.
Value distribution_param(LowerCtx& ctx, const char* name, ElementType ce, const Dims& dims) {
  return hlo::broadcast_to(ctx.operand(name, scalar_type(ce)), dims);
}

}  // namespace

Value uniform_bits_to_float(Value bits, ElementType e) {
  Builder& b = bits.builder();
  Dims dims = bits.dims();
  if (e == ElementType::kF64) {
    Value m = hlo::binary("shift_right_logical", bits, u_const(b, ElementType::kU64, dims, 12));
    m = hlo::binary("or", m, u_const(b, ElementType::kU64, dims, 0x3FF0000000000000ULL));
    Value f = hlo::bitcast_convert(m, ElementType::kF64);
    return hlo::sub(f, hlo::full(b, ElementType::kF64, dims, 1.0));
  }
  Value m = hlo::binary("shift_right_logical", bits, u_const(b, ElementType::kU32, dims, 9));
  m = hlo::binary("or", m, u_const(b, ElementType::kU32, dims, 0x3F800000ULL));
  Value f = hlo::bitcast_convert(m, ElementType::kF32);
  return hlo::sub(f, hlo::full(b, ElementType::kF32, dims, 1.0));
}

Value uniform01(Value key, Dims dims, ElementType e) {
  auto [state, bits] = hlo::rng_bit_generator(key, dims, e == ElementType::kF64 ? ElementType::kU64 : ElementType::kU32);
  (void)state;
  return uniform_bits_to_float(bits, e);
}

Value box_muller(Value u1, Value u2) {
  u1 = hlo::sub(hlo::full_like(u1, 1.0), u1);
  Value r = hlo::unary("sqrt", hlo::mul(hlo::full_like(u1, -2.0), hlo::unary("log", u1)));
  Value theta = hlo::mul(hlo::full_like(u2, 2.0 * M_PI), u2);
  return hlo::mul(r, hlo::unary("cosine", theta));
}

Value standard_normal(Value key, Dims dims, ElementType e) {
  Dims two = dims;
  two.insert(two.begin(), 2);
  Value u = uniform01(key, two, e);
  Dims start(two.size(), 0), limit = two;
  limit[0] = 1;
  Value u1 = hlo::reshape(hlo::slice(u, start, limit), dims);
  start[0] = 1;
  limit[0] = 2;
  Value u2 = hlo::reshape(hlo::slice(u, start, limit), dims);
  return box_muller(u1, u2);
}

namespace {

// [..., 2] real values (real and imaginary parts on the last axis) as the
// complex tensor [...]: complex draws are drawn as their view_as_real.
Value complex_of_pairs(Value r) {
  Dims dims = r.dims(), start(dims.size(), 0), limit = dims;
  dims.pop_back();
  limit.back() = 1;
  Value re = hlo::reshape(hlo::slice(r, start, limit), dims);
  start.back() = 1;
  limit.back() = 2;
  return hlo::make_complex(re, hlo::reshape(hlo::slice(r, start, limit), dims));
}

}  // namespace

TPU_LOWERING(uniform) {
  at::ScalarType t = out_type(ctx);
  // CPU and CUDA refuse integer tensors ("check_uniform_bounds" not
  // implemented for 'Long'); filling them would truncate.
  ew::require_floating(ctx, t, /*complex_ok=*/true);
  Dims dims = out_dims(ctx);
  if (at::isComplexType(t)) {
    // CPU and CUDA fill the real and imaginary parts alike and independently
    // (uniform_ of view_as_real), each in [from, to).
    ElementType ce = compute_float(c10::toRealValueType(t));
    Dims two = dims;
    two.push_back(2);
    Value u = uniform01(ctx.rng_key(), two, ce);
    Value from = distribution_param(ctx, "from", ce, two), to = distribution_param(ctx, "to", ce, two);
    return {complex_of_pairs(hlo::add(from, hlo::mul(u, hlo::sub(to, from))))};
  }
  ElementType ce = compute_float(t);
  Value u = uniform01(ctx.rng_key(), dims, ce);
  Value from = distribution_param(ctx, "from", ce, dims);
  Value to = distribution_param(ctx, "to", ce, dims);
  Value r = hlo::add(from, hlo::mul(u, hlo::sub(to, from)));
  if (t == at::kBFloat16 || t == at::kHalf) {
    // Rounding may land on `to`; keep the interval half-open like CPU.
    Value rr = hlo::convert(r, element_type(t));
    Value back = hlo::convert(rr, ce);
    Value hit = hlo::compare(back, to, "GE");
    Value lower = hlo::convert(from, element_type(t));
    Value pos = hlo::compare(to, from, "GT");
    return {hlo::select(hlo::binary("and", hit, pos), lower, rr)};
  }
  return {r};
}

namespace {

// mean + std * N(0, 1), shared by normal and log_normal.
Value scaled_normal(LowerCtx& ctx, ElementType ce) {
  Dims dims = out_dims(ctx);
  Value z = standard_normal(ctx.rng_key(), dims, ce);
  return hlo::add(distribution_param(ctx, "mean", ce, dims), hlo::mul(z, distribution_param(ctx, "std", ce, dims)));
}

// A parameter of a complex draw as [..., 2] (real and imaginary parts on a
// last axis), broadcast to `two`: a complex tensor gives each part its own,
// a real one (or a Scalar) the same to both, as normal_ of view_as_real does.
Value pair_param(LowerCtx& ctx, const char* name, ElementType ce, const Dims& two) {
  Value v;
  if (ctx.is_tensor(name) && at::isComplexType(ctx.dtype_of(name))) {
    Value m = ctx.tensor(name);
    Dims d = m.dims();
    d.push_back(1);
    v = hlo::concatenate({hlo::reshape(hlo::convert(hlo::real(m), ce), d),
                          hlo::reshape(hlo::convert(hlo::imag(m), ce), d)},
                         static_cast<int64_t>(d.size()) - 1);
  } else {
    v = ctx.operand(name, scalar_type(ce));
    Dims d = v.dims();
    d.push_back(1);
    v = hlo::reshape(v, d);
  }
  return hlo::broadcast_to(v, two);
}

// Complex normal: CPU and CUDA draw the real and imaginary parts
// independently, each with std / sqrt(2) (so E|z - mean|^2 = std^2).
Value complex_normal(LowerCtx& ctx, at::ScalarType t) {
  ElementType ce = compute_float(c10::toRealValueType(t));
  Dims dims = out_dims(ctx), two = dims;
  two.push_back(2);
  Value z = standard_normal(ctx.rng_key(), two, ce);
  Value sd = hlo::mul(pair_param(ctx, "std", ce, two), hlo::full(ctx.b(), ce, two, 1.0 / std::sqrt(2.0)));
  return complex_of_pairs(hlo::add(pair_param(ctx, "mean", ce, two), hlo::mul(z, sd)));
}

}  // namespace

TPU_LOWERING(normal) {
  if (ctx.is_tensor("std")) {
    // CPU's check of a tensor std (a float std is checked on the host)
    Value sd = ctx.tensor("std");
    check_data(ctx, hlo::unary("not", hlo::compare(sd, hlo::zeros_like(sd), "GE")),
               "normal expects all elements of std >= 0.0");
  }
  if (at::isComplexType(out_type(ctx))) return {complex_normal(ctx, out_type(ctx))};
  return {scaled_normal(ctx, compute_float(out_type(ctx)))};
}

TPU_LOWERING(log_normal) {
  return {hlo::unary("exponential", scaled_normal(ctx, compute_float(out_type(ctx))))};
}

TPU_LOWERING(bernoulli) {
  Dims dims = out_dims(ctx);
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(out_type(ctx)), "\"", ctx.op_name(), "\" not implemented for '",
                              c10::toString(out_type(ctx)), "'");
  // Compare in f64 only when p is double, as CPU draws doubles then.
  at::ScalarType pt = ctx.is_tensor("p") ? ctx.dtype_of("p") : ctx.has("p") ? at::kFloat : ctx.dtype_of("self");
  ElementType ce = pt == at::kDouble ? ElementType::kF64 : ElementType::kF32;
  Value p;
  if (ctx.has("p"))
    p = ctx.operand("p", scalar_type(ce));
  else
    p = hlo::convert(ctx.tensor("self"), ce);
  if (!ctx.has("p") || ctx.is_tensor("p")) {
    // CPU's check of a tensor p (a float p is checked on the host before
    // this); NaN fails it too.
    Value in01 = hlo::binary("and", hlo::compare(p, hlo::zeros_like(p), "GE"), hlo::compare(p, hlo::full_like(p, 1.0), "LE"));
    check_data(ctx, hlo::unary("not", in01),
               "bernoulli(): Expected p_in >= 0 && p_in <= 1 to be true, but got false (p must hold probabilities)");
  }
  p = hlo::broadcast_to(p, dims);
  Value u = uniform01(ctx.rng_key(), dims, ce);
  return {hlo::compare(u, p, "LT")};
}

TPU_LOWERING(exponential) {
  at::ScalarType t = out_type(ctx);
  ElementType ce = compute_float(t);
  Dims dims = out_dims(ctx);
  Value u = uniform01(ctx.rng_key(), dims, ce);
  Value lambd = distribution_param(ctx, "lambd", ce, dims);
  // -log(1 - u) / lambda with 1 - u in (0, 1].
  Value l = hlo::unary("log_plus_one", hlo::neg(u));
  return {hlo::div(hlo::neg(l), lambd)};
}

TPU_LOWERING(geometric) {
  at::ScalarType t = out_type(ctx);
  ElementType ce = compute_float(t);
  Dims dims = out_dims(ctx);
  Value u = uniform01(ctx.rng_key(), dims, ce);
  Value p = distribution_param(ctx, "p", ce, dims);
  Value num = hlo::unary("log_plus_one", hlo::neg(u));  // log(1 - u), in (-inf, 0]
  Value den = hlo::unary("log_plus_one", hlo::neg(p));
  Value k = hlo::unary("ceil", hlo::div(num, den));
  return {hlo::max(k, hlo::full_like(k, 1.0))};
}

TPU_LOWERING(cauchy) {
  at::ScalarType t = out_type(ctx);
  ElementType ce = compute_float(t);
  Dims dims = out_dims(ctx);
  Value u = uniform01(ctx.rng_key(), dims, ce);
  Value median = distribution_param(ctx, "median", ce, dims);
  Value sigma = distribution_param(ctx, "sigma", ce, dims);
  Value angle = hlo::mul(hlo::full_like(u, M_PI), hlo::sub(u, hlo::full_like(u, 0.5)));
  return {hlo::add(median, hlo::mul(sigma, hlo::unary("tan", angle)))};
}

namespace {

// Largest value random_ draws when no upper bound is given: the type's max
// for integers, 2^digits for floats (every integer up to it is exact).
uint64_t random_default_to_inclusive(at::ScalarType t) {
  switch (t) {
    case at::kBool: return 1;
    case at::kByte: return 255;
    case at::kChar: return 127;
    case at::kShort: return 32767;
    case at::kInt: return 2147483647ULL;
    case at::kLong: return 9223372036854775807ULL;
    case at::kUInt32: return 4294967295ULL;
    case at::kUInt64: return 18446744073709551615ULL;
    case at::kHalf: return 1ULL << 11;
    case at::kBFloat16: return 1ULL << 8;
    case at::kFloat: return 1ULL << 24;
    case at::kDouble: return 1ULL << 53;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: random_ is not supported for dtype ", t);
  }
}

// The values an integral (or bool) dtype holds, and the C++ name CPU's
// range check prints for it; nullopt for floating types.
struct IntRange {
  int64_t lo, hi;
  const char* name;
};
std::optional<IntRange> int_range(at::ScalarType t) {
  switch (t) {
    case at::kBool: return IntRange{0, 1, "bool"};
    case at::kByte: return IntRange{0, 255, "unsigned char"};
    case at::kChar: return IntRange{-128, 127, "signed char"};
    case at::kShort: return IntRange{-32768, 32767, "short"};
    case at::kInt: return IntRange{-2147483648LL, 2147483647LL, "int"};
    case at::kUInt16: return IntRange{0, 65535, "unsigned short"};
    case at::kUInt32: return IntRange{0, 4294967295LL, "unsigned int"};
    default: return std::nullopt;  // int64, uint64 and floats: every int64 `from`/`to` passes here
  }
}

}  // namespace

TPU_LOWERING(random) {
  at::ScalarType t = out_type(ctx);
  TORCH_CHECK(!at::isComplexType(t), "check_random_bounds handles only integral, floating-point and boolean types");
  Dims dims = out_dims(ctx);
  int64_t from = 0;
  uint64_t range = 0;  // number of values; 0 means all 2^64
  if (ctx.has("from")) from = ctx.int_arg("from");
  if (ctx.has("to") && !ctx.is_none("to")) {
    int64_t to = ctx.int_arg("to");
    TORCH_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
    // CPU's and CUDA's range check: values outside the dtype would wrap.
    if (auto r = int_range(t)) {
      TORCH_CHECK(from >= r->lo && from <= r->hi, "from is out of bounds for ", r->name);
      TORCH_CHECK(to - 1 >= r->lo && to - 1 <= r->hi, "to - 1 is out of bounds for ", r->name);
    }
    range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  } else {
    uint64_t to_inc = random_default_to_inclusive(t);
    if (t == at::kUInt64 && from == 0) {
      range = 0;
    } else {
      range = to_inc - static_cast<uint64_t>(from) + 1;
    }
  }
  auto [state, bits] = hlo::rng_bit_generator(ctx.rng_key(), dims, ElementType::kU64);
  (void)state;
  Builder& b = ctx.b();
  Value r = bits;
  if (range != 0) r = hlo::binary("remainder", bits, u_const(b, ElementType::kU64, dims, range));
  Value v = hlo::bitcast_convert(r, ElementType::kI64);
  v = hlo::add(v, hlo::broadcast_in_dim(hlo::constant_int(b, ElementType::kI64, from), dims, {}));
  if (t == at::kUInt64) return {hlo::bitcast_convert(v, ElementType::kU64)};
  return {v};
}

TPU_LOWERING(randperm) {
  int64_t n = ctx.int_arg("n");
  TORCH_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  auto [state, keys] = hlo::rng_bit_generator(ctx.rng_key(), {n}, ElementType::kU64);
  (void)state;
  Value idx = hlo::iota(ctx.b(), ElementType::kI64, {n}, 0);
  auto sorted = hlo::sort({keys, idx}, 0, false, true);
  return {sorted[1]};
}

}  // namespace torch_tpu::lowering
