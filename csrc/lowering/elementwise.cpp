// Elementwise math: one short rule per ATen op.
#include "lowering/registry.h"

namespace torch_tpu::lowering {

TPU_LOWERING(add) {
  auto t = *ctx.out_dtype();
  Value a = ctx.operand("self", t), b = ctx.operand("other", t);
  auto dims = *ctx.out_sizes();
  a = hlo::broadcast_to(a, dims);
  b = hlo::broadcast_to(b, dims);
  if (ctx.has("alpha")) b = hlo::mul(b, hlo::broadcast_to(ctx.operand("alpha", t), dims));
  return {hlo::add(a, b)};
}

}  // namespace torch_tpu::lowering
