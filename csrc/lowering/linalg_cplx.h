// Complex-aware pieces shared by the dense linear-algebra rules. Each
// algorithm is written once for real and complex matrices: for a real value
// these helpers reduce to the real formulas (conj is the identity, |x|^2 is
// x*x, an adjoint solve is a transposed one), so real programs are unchanged.
#pragma once

#include "hlo/complex_ops.h"
#include "lowering/linalg_util.h"

namespace torch_tpu::lowering::la {

inline bool cplx(Value a) { return hlo::is_complex(a.element()); }
inline ElementType real_of(ElementType e) { return hlo::is_complex(e) ? hlo::complex_component(e) : e; }

inline Value cj(Value a) { return hlo::conj(a); }  // identity for real
// Conjugate transpose [..., m, n] -> [..., n, m].
inline Value mH(Value a) { return cj(mT(a)); }

// |a|^2 as a real value (the component type for complex a).
inline Value abs2(Value a) {
  if (!cplx(a)) return hlo::mul(a, a);
  Value r = hlo::real(a), i = hlo::imag(a);
  return hlo::add(hlo::mul(r, r), hlo::mul(i, i));
}

// LAPACK's cabs1 (|re| + |im|), the magnitude i?amax pivots on; |a| for real.
inline Value cabs1(Value a) {
  if (!cplx(a)) return hlo::unary("abs", a);
  return hlo::add(hlo::unary("abs", hlo::real(a)), hlo::unary("abs", hlo::imag(a)));
}

// A real value in element type e (imaginary part 0 when e is complex).
inline Value as_elem(Value r, ElementType e) { return hlo::convert(r, e); }

// re + i im in element type e (re alone when e is real).
inline Value mk(Value re, Value im, ElementType e) { return hlo::is_complex(e) ? hlo::make_complex(re, im) : re; }

// z / |z| (1 where z == 0): the phase of z, sign(z) for real z.
inline Value phase(Value z) {
  Value a = hlo::unary("abs", z);  // real
  Value zero = hlo::zeros_like(a);
  Value nz = hlo::compare(a, zero, "NE");
  Value safe = as_elem(hlo::select(nz, a, hlo::full_like(a, 1)), z.element());
  return hlo::select(nz, hlo::div(z, safe), hlo::full_like(z, 1));
}

// Triangular solve where `adjoint` means op(A) = A^H (stablehlo's TRANSPOSE
// is a plain transpose: conjugating A first makes it the adjoint).
inline Value tsolve(Value a, Value b, bool left, bool lower, bool unit, bool adjoint) {
  if (adjoint) a = cj(a);
  return hlo::triangular_solve(a, b, left, lower, unit, adjoint);
}

// Not NaN (either part, for complex).
inline Value not_nan(Value x) {
  Value a = hlo::unary("abs", x);
  return hlo::compare(a, a, "EQ");
}

// Hermitian (symmetric for real) matrix read from one triangle; the diagonal's
// imaginary part is ignored, as LAPACK does.
inline Value hermitize(Value a, bool lower) {
  Value t = lower ? tril(a) : triu(a);
  Value strict = lower ? tril(a, -1) : triu(a, 1);
  Value h = hlo::add(t, mH(strict));
  if (!cplx(a)) return h;
  Builder& b = a.builder();
  Value eq = hlo::compare(row_idx(b, h.dims()), col_idx(b, h.dims()), "EQ");
  return hlo::select(eq, as_elem(hlo::real(h), h.element()), h);
}

inline void check_float_or_complex(LowerCtx& ctx, std::string_view name) {
  at::ScalarType t = ctx.dtype_of(name);
  // NotImplementedError, as CPU's and CUDA's dispatch of these kernels.
  TORCH_CHECK_NOT_IMPLEMENTED(
      t == at::kFloat || t == at::kDouble || t == at::kComplexFloat || t == at::kComplexDouble, "\"",
      ctx.op_name(), "\" not implemented for '", c10::toString(t),
      "' (tpu supports float32, float64, complex64 and complex128 inputs)");
}

}  // namespace torch_tpu::lowering::la
