// The dtype rule for a normalisation's weight and bias, shared by layer norm
// (nn.cpp) and group norm (norm.cpp).
#pragma once

#include <initializer_list>

#include "lowering/context.h"

namespace torch_tpu::lowering {

// A normalisation's weight and bias take the input's dtype, or float32 for
// a bfloat16/float16 input (mixed precision); CPU and CUDA refuse any other
// pair (a float32 input with float64 weights), and so does this.
void check_norm_params(const LowerCtx& ctx, const char* op, std::initializer_list<const char*> params);

}  // namespace torch_tpu::lowering
