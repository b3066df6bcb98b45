// Structured ops' functional overloads (and a few elementwise composites)
// straight to the lowering engine (structured_direct.cpp).
#pragma once

namespace torch_tpu::aten {

// Registers them once; returns how many overloads it took over (0 when
// TORCH_TPU_DIRECT_STRUCTURED=0).
int register_structured_direct();

}  // namespace torch_tpu::aten
