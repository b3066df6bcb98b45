// Small helpers shared by the elementwise lowering files (elementwise.cpp,
// unary.cpp, compare.cpp, activation.cpp).
#pragma once

#include <ATen/ExpandUtils.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/ScalarType.h>

#include <initializer_list>
#include <limits>
#include <string_view>

#include "hlo/complex_ops.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering::ew {

// The type PyTorch computes in: reduced-precision floats go through float32
// (PyTorch's "opmath" type), so e.g. bf16 addcmul rounds once like CPU does.
inline at::ScalarType opmath(at::ScalarType t) {
  if (t == at::kComplexHalf) return at::kComplexFloat;
  return (t == at::kBFloat16 || t == at::kHalf) ? at::kFloat : t;
}
inline at::ScalarType default_float() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }
// Integer/bool inputs of float functions (exp, sqrt, true division) give the
// default float dtype; float and complex inputs keep theirs.
inline at::ScalarType float_type(at::ScalarType t) {
  return at::isFloatingType(t) || at::isComplexType(t) ? t : default_float();
}
// For ops that do not promote integers to float (their result keeps an
// integer input's dtype) and whose CPU and CUDA kernels take floating
// types only (gelu, hypot, lerp...): refuse the others as their dispatch
// does, rather than compute in float and truncate into the integer result.
inline void require_floating(LowerCtx& ctx, at::ScalarType t, bool complex_ok = false) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t) || (complex_ok && at::isComplexType(t)), "\"", ctx.op_name(),
                              "\" not implemented for '", c10::toString(t), "'");
}
// Ops CPU and CUDA define for real numbers only (ordering comparisons,
// atan2, rounded division, remainder, xlogy): a complex operand is refused
// as their dispatch refuses it, not answered (a lexicographic `<`).
// `bool_ok = false` refuses booleans too (remainder of two bools).
inline void require_real(LowerCtx& ctx, at::ScalarType t, bool bool_ok = true) {
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(t) && (bool_ok || t != at::kBool), "\"", ctx.op_name(),
                              "\" not implemented for '", c10::toString(t), "'");
}
// Float or complex element type: the ones NaN and inf apply to.
inline bool is_inexact(ElementType e) { return hlo::is_float(e) || hlo::is_complex(e); }

inline ElementType et(at::ScalarType t) { return element_type(t); }

inline Value falses(Builder& b, Value like) { return hlo::full(b, ElementType::kPred, like.dims(), 0); }

// The op's output shape: the meta kernel's, else the broadcast of the named
// tensor arguments.
inline Dims out_dims(LowerCtx& ctx, std::initializer_list<std::string_view> names) {
  if (auto s = ctx.out_sizes()) return *s;
  std::vector<int64_t> shape;
  for (auto n : names)
    if (ctx.is_tensor(n)) shape = at::infer_size(shape, ctx.tensor_arg(n).sizes());
  return shape;
}

// A tensor or Scalar argument in `dtype`, broadcast to `dims`.
// Bool tensors become floats through int32: XLA:CPU miscompiles
// divide(convert(pred), broadcast(convert(pred))) (0/0 gives 0, not NaN).
// A tensor operand of another dtype than the rule's promoted bf16/f16 type
// (a 0-dim float32 tensor, an integer tensor) is rounded to that type first,
// as TensorIterator casts it (CUDA for device tensors, CPU for most ops)
// before computing in float32: bf16 x + torch.tensor(0.1) adds bf16(0.1).
// Python numbers (wrapped numbers) are not rounded, as in CUDA's opmath
// kernels (design.md, Known limits).
inline bool rounds_to_common_first(LowerCtx& ctx, std::string_view name, at::ScalarType dtype) {
  auto common = ctx.common_dtype();
  if (!common || opmath(*common) == *common || opmath(*common) != dtype || !ctx.is_tensor(name)) return false;
  const at::Tensor& t = ctx.tensor_arg(name);
  return t.scalar_type() != *common && t.scalar_type() != at::kBool && !t.unsafeGetTensorImpl()->is_wrapped_number();
}
// `cast_first = false` reads a tensor at its own precision (see mul/div).
inline Value in(LowerCtx& ctx, std::string_view name, at::ScalarType dtype, Dims dims, bool cast_first = true) {
  if (ctx.is_tensor(name) && ctx.dtype_of(name) == at::kBool && (at::isFloatingType(dtype) || at::isComplexType(dtype)))
    return hlo::broadcast_to(hlo::convert(ctx.operand(name, at::kInt), element_type(dtype)), dims);
  if (cast_first && rounds_to_common_first(ctx, name, dtype))
    return hlo::broadcast_to(hlo::convert(ctx.operand(name, *ctx.common_dtype()), element_type(dtype)), dims);
  return hlo::broadcast_to(ctx.operand(name, dtype), dims);
}

// NaN test; a complex value is NaN where either part is.
inline Value is_nan(Value x) { return hlo::compare(x, x, "NE"); }
// inf, -inf or NaN (|x| < inf fails for NaN too)
inline Value not_finite(Value x) {
  return hlo::unary("not", hlo::compare(hlo::unary("abs", x), hlo::full_like(x, std::numeric_limits<double>::infinity()), "LT"));
}
inline Value or_(Value a, Value b) { return hlo::binary("or", a, b); }
inline Value and_(Value a, Value b) { return hlo::binary("and", a, b); }
inline Value not_(Value a) { return hlo::unary("not", a); }

// Maximum / minimum propagating NaN (PyTorch's maximum, clamp, relu).
inline Value nan_max(Value a, Value b) {
  Value m = hlo::max(a, b);
  if (!hlo::is_float(a.element())) return m;
  return hlo::select(or_(is_nan(a), is_nan(b)), hlo::add(a, b), m);
}
inline Value nan_min(Value a, Value b) {
  Value m = hlo::min(a, b);
  if (!hlo::is_float(a.element())) return m;
  return hlo::select(or_(is_nan(a), is_nan(b)), hlo::add(a, b), m);
}

// Rounds toward zero (floats only).
inline Value trunc(Value x) {
  return hlo::select(hlo::compare(x, hlo::full_like(x, 0), "LT"), hlo::unary("ceil", x), hlo::unary("floor", x));
}

// Horner evaluation, highest-degree coefficient first.
template <size_t N>
Value polynomial(Value x, const double (&c)[N]) {
  Value r = hlo::full_like(x, c[0]);
  for (size_t i = 1; i < N; ++i) r = hlo::add(hlo::mul(r, x), hlo::full_like(x, c[i]));
  return r;
}

// erf / erfc of a float value (accurate to its precision), defined in
// unary.cpp.
Value erf(Value x);
Value erfc(Value x);
// The sign bit of a float value; complex `op` evaluated where f(conj z) =
// conj f(z) holds with a -0 imaginary part honoured; principal_sqrt of a real or
// complex value (complex through conj_symmetric). Defined in unary.cpp.
Value sign_bit(Value x);
Value conj_symmetric(const char* op, Value z);
Value principal_sqrt(Value x);

// `v` (in a wider compute type) rounded to `t` and back: the intermediate
// rounding CPU's bf16/f16 kernels make when they compute in that type.
inline Value round_through(Value v, at::ScalarType t) {
  return hlo::convert(hlo::convert(v, element_type(t)), v.element());
}

}  // namespace torch_tpu::lowering::ew
