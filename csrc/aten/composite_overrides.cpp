// Ops whose CompositeExplicitAutograd kernel would shadow the boxed fallback
// (and decompose into something slower or unlowered): sent straight to the
// lowering engine instead.
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Otherwise a native_batch_norm decomposition.
  m.impl("native_layer_norm", torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
  // Otherwise masked_select, which reads its size from the device (a sync).
  // Otherwise a composite that rejects devices other than CPU and CUDA.
  m.impl("mode.values", torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
  m.impl("masked_scatter_backward", torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
}

}  // namespace torch_tpu::aten
