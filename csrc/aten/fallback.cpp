// Every ATen op without a dedicated tpu kernel goes through the lowering
// table (exec/op_runner): one boxed kernel for hundreds of ops.
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
}

}  // namespace torch_tpu::aten
