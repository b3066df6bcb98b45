// Complex parts and construction (defined in ops.cpp). Kept out of ops.h so
// that only the files that use them depend on them.
#pragma once

#include "hlo/ops.h"

namespace torch_tpu::hlo {

// hlo::unary("abs", z) of a complex z is real (its modulus); the other
// unary ops keep the element type. real/imag of a real value are the value
// itself / zeros.
Value real(Value z);
Value imag(Value z);
// re + i im from f32 (-> complex<f32>) or f64 (-> complex<f64>) parts.
Value make_complex(Value re, Value im);
Value conj(Value z);  // identity for real values

}  // namespace torch_tpu::hlo
