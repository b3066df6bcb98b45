// copy_, fill_, zero_, clone: moving values between tensors.
#include "lowering/registry.h"

namespace torch_tpu::lowering {

// copy_(self, src): the execution layer converts src to self's dtype and
// broadcasts it to self's shape.
TPU_LOWERING(copy) { return {ctx.tensor("src")}; }

TPU_LOWERING(fill) {
  const auto& self = ctx.tensor_arg("self");
  return {ctx.operand("value", self.scalar_type())};
}

TPU_LOWERING(zero) {
  const auto& self = ctx.tensor_arg("self");
  return {hlo::constant(ctx.b(), element_type(self.scalar_type()), 0)};
}

}  // namespace torch_tpu::lowering
