// Ops whose CompositeExplicitAutograd kernel would shadow the boxed fallback
// (and decompose into something slower or unlowered): sent straight to the
// lowering engine instead.
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto engine = [] { return torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>(); };
  // Otherwise a native_batch_norm decomposition.
  m.impl("native_layer_norm", engine());
  // Otherwise masked_select, which reads its size from the device (a sync).
  m.impl("masked_scatter_backward", engine());
  // One program with CPU's rounding instead of separate mul and add.
  m.impl("addr", engine());
  m.impl("addr.out", engine());
  // Otherwise a composite that rejects devices other than CPU and CUDA.
  m.impl("mode.values", engine());
}

}  // namespace torch_tpu::aten
