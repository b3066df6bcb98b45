// _transform_bias_rescale_qkv(qkv [B, T, 3 D], qkv_bias [3 D], num_heads):
// the input step of the fused multi-head-attention path. Adds the bias and
// splits into q, k, v, each [B, heads, T, D / heads]; q is scaled by
// 1 / sqrt(D / heads). Computed in f32 for bf16/f16 and rounded once.
// (CPU returns three views of one buffer; here three tensors.)
#include <c10/util/Exception.h>

#include <cmath>

#include "lowering/registry.h"

namespace torch_tpu::lowering {

TPU_LOWERING(_transform_bias_rescale_qkv) {
  const at::Tensor& qkv = ctx.tensor_arg("qkv");
  const at::Tensor& bias = ctx.tensor_arg("qkv_bias");
  int64_t heads = ctx.int_arg("num_heads");
  TORCH_CHECK(qkv.dim() == 3, ctx.op_name(), ": expected qkv of shape [B, T, 3 * D], got ", qkv.sizes());
  int64_t nb = qkv.size(0), t = qkv.size(1), d3 = qkv.size(2);
  TORCH_CHECK(d3 % 3 == 0, ctx.op_name(), ": qkv's last dim ", d3, " is not divisible by 3");
  int64_t d = d3 / 3;
  TORCH_CHECK(heads > 0 && d % heads == 0, ctx.op_name(), ": embedding dim ", d, " is not divisible by num_heads ",
              heads);
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == d3, ctx.op_name(), ": expected qkv_bias of shape [", d3, "], got ",
              bias.sizes());
  TORCH_CHECK(bias.scalar_type() == qkv.scalar_type(), ctx.op_name(), ": qkv and qkv_bias must have the same dtype, got ",
              qkv.scalar_type(), " and ", bias.scalar_type());
  int64_t dh = d / heads;
  ElementType orig = element_type(qkv.scalar_type());
  ElementType acc = orig == ElementType::kBF16 || orig == ElementType::kF16 ? ElementType::kF32 : orig;
  Value x = hlo::convert(ctx.tensor("qkv"), acc);
  Value b = hlo::broadcast_in_dim(hlo::convert(ctx.tensor("qkv_bias"), acc), x.dims(), {2});
  // [B, T, 3, heads, dh] -> [3, B, heads, T, dh]
  Value y = hlo::transpose(hlo::reshape(hlo::add(x, b), {nb, t, 3, heads, dh}), {2, 0, 3, 1, 4});
  Dims part = {nb, heads, t, dh};
  std::vector<Value> out;
  for (int64_t i = 0; i < 3; ++i) {
    Value p = hlo::reshape(hlo::slice(y, {i, 0, 0, 0, 0}, {i + 1, nb, heads, t, dh}), part);
    if (i == 0) {
      // CPU: 1 / sqrt(dh) computed in the input dtype, then multiplied.
      double inv = 1.0 / std::sqrt(static_cast<double>(dh));
      Value s = hlo::convert(hlo::convert(hlo::constant(ctx.b(), ElementType::kF64, inv), orig), acc);
      p = hlo::mul(p, hlo::broadcast_in_dim(s, part, {}));
    }
    out.push_back(hlo::convert(p, orig));
  }
  return out;
}

}  // namespace torch_tpu::lowering
