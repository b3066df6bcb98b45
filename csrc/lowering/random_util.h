// Random-number helpers shared by the random and nn lowering rules.
#pragma once

#include "lowering/context.h"

namespace torch_tpu::lowering {

// Turns random bits (ui32 for f32, ui64 for f64) into floats in [0, 1).
Value uniform_bits_to_float(Value bits, ElementType e);
// Uniform floats in [0, 1) of type `e` (F32 or F64) from `key`.
Value uniform01(Value key, Dims dims, ElementType e);
// Standard normal floats of type `e` (F32 or F64) from `key` (Box-Muller).
Value standard_normal(Value key, Dims dims, ElementType e);

}  // namespace torch_tpu::lowering
