// Random-number helpers shared by the random and nn lowering rules.
#pragma once

#include "lowering/context.h"

namespace torch_tpu::lowering {

// The float type random values are computed in: f64 for double, f32 for
// everything else (bf16/f16 are rounded from f32 at the end, like CPU's
// generators that draw floats then cast).
inline ElementType compute_float(at::ScalarType t) { return t == at::kDouble ? ElementType::kF64 : ElementType::kF32; }

// Turns random bits (ui32 for f32, ui64 for f64) into floats in [0, 1).
Value uniform_bits_to_float(Value bits, ElementType e);
// Uniform floats in [0, 1) of type `e` (F32 or F64) from `key`.
Value uniform01(Value key, Dims dims, ElementType e);
// Standard normal floats of type `e` (F32 or F64) from `key` (Box-Muller).
Value standard_normal(Value key, Dims dims, ElementType e);
// Box-Muller: one standard normal per pair of independent uniforms in
// [0, 1) (`u1` is used as 1 - u1, in (0, 1], so its log is finite).
Value box_muller(Value u1, Value u2);

}  // namespace torch_tpu::lowering
