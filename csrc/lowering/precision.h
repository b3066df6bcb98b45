// fp32 matmul precision, TPU style: DEFAULT (one bf16 pass), HIGH (three
// bf16 passes), HIGHEST (fp32). The setting is PyTorch's own
// float32 matmul precision (torch.set_float32_matmul_precision /
// torch.tpu.precision): "medium" -> DEFAULT, "high" -> HIGH, "highest" ->
// HIGHEST. It is read when a program is lowered and is part of every program
// key, so changing it recompiles.
#pragma once

#include "hlo/ops.h"

namespace torch_tpu::lowering {

enum class MatmulPrecision { kDefault = 0, kHigh = 1, kHighest = 2 };

MatmulPrecision matmul_precision();

// lhs · rhs accumulated in `acc`. For f32 products the current precision
// applies: on a TPU through dot_general's precision_config; elsewhere (XLA:CPU
// ignores it) by rounding the operands to bf16 and summing the passes the TPU
// would make, so results match what a TPU computes.
hlo::Value matmul_dot(hlo::Value lhs, hlo::Value rhs, const hlo::DotDims& dd, hlo::ElementType acc);

// The lhs of a dot that contracts its last dimension, read from a view whose
// contracting dimension is not the innermost in memory (a transposed view:
// autograd's weight gradient grad_out.t() @ x, bmm's backward). On XLA:CPU
// such a lhs is put behind an optimization_barrier: XLA's transpose folding
// would otherwise fold the view's transpose into the dot (contracting lhs
// dimension 0), a form XLA:CPU leaves to a plain Eigen dot, where a dot
// contracting the lhs's last dimension goes to YNNPACK (the faster GEMM).
// Behind the barrier the transpose stays a copy (fused with whatever
// produces it), as jax's own programs get it after XLA canonicalises their
// multi-dimension contractions. Elsewhere (a TPU folds transposes into its
// matrix unit) and for types other than f32, `lhs` is returned as is.
hlo::Value unfolded_transposed_lhs(hlo::Value lhs, bool transposed_view);

}  // namespace torch_tpu::lowering
