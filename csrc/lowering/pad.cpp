// Padding: constant_pad_nd, reflection_pad{1,2,3}d and replication_pad{1,2,3}d
// with their backward ops.
//
// Reflection and replication padding gather every padded dim through a
// constant index vector (output position -> input position), computed on
// the host; negative padding (cropping) falls out of the same mapping. The
// backward ops scatter-add the gradient back through the same vectors.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>

#include "lowering/compute_util.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

int64_t reflect_index(int64_t j, int64_t n) {
  if (n <= 1) return 0;
  int64_t period = 2 * (n - 1);
  j = std::llabs(j) % period;
  return j >= n ? period - j : j;
}

// For padded dim i (0 = last): input position of every output position.
std::vector<int64_t> source_positions(int64_t n, int64_t left, int64_t right, bool reflect) {
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < n + left + right; ++k) {
    int64_t j = k - left;
    idx.push_back(reflect ? reflect_index(j, n) : std::clamp<int64_t>(j, 0, n - 1));
  }
  return idx;
}

std::vector<Value> pad_forward(LowerCtx& ctx, int64_t nd, bool reflect) {
  Value x = ctx.tensor("self");
  auto p = ctx.ints_arg("padding");
  Dims out = *ctx.out_sizes(0);
  if (numel_of(out) == 0) return {hlo::full(ctx.b(), x.element(), out, 0)};
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = x.rank() - 1 - i;
    auto idx = source_positions(x.dim(d), p[2 * i], p[2 * i + 1], reflect);
    x = hlo::take_along_dim(x, d, hlo::constant_i64_vector(ctx.b(), idx));
  }
  return {x};
}

std::vector<Value> pad_backward(LowerCtx& ctx, int64_t nd, bool reflect) {
  Value g = ctx.tensor("grad_output");
  const at::Tensor& self = ctx.tensor_arg("self");
  auto p = ctx.ints_arg("padding");
  Dims in = self.sizes().vec();
  ElementType e = g.element();
  if (numel_of(in) == 0 || g.type().numel() == 0) return {hlo::full(ctx.b(), e, in, 0)};
  // Half types accumulate in f32 (several output cells add into one).
  if (e == ElementType::kBF16 || e == ElementType::kF16) g = hlo::convert(g, ElementType::kF32);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = g.rank() - 1 - i;
    int64_t n = in[d];
    auto idx = source_positions(n, p[2 * i], p[2 * i + 1], reflect);
    g = hlo::scatter_add_along_dim(g, d, hlo::constant_i64_vector(ctx.b(), idx), n);
  }
  return {g};
}

}  // namespace

// constant_pad_nd(self, pad, value): pairs from the last dim backwards;
// negative entries crop.
TPU_LOWERING(constant_pad_nd) {
  Value x = ctx.tensor("self");
  auto p = ctx.ints_arg("pad");
  Dims out = *ctx.out_sizes(0);
  if (numel_of(out) == 0) return {hlo::full(ctx.b(), x.element(), out, 0)};
  Value v = ctx.operand("value", ctx.dtype_of("self"));
  int64_t r = x.rank();
  Dims low(r, 0), high(r, 0);
  for (size_t i = 0; i < p.size() / 2; ++i) {
    low[r - 1 - i] = p[2 * i];
    high[r - 1 - i] = p[2 * i + 1];
  }
  if (x.type().numel() == 0) return {hlo::broadcast_to(v, out)};
  return {hlo::pad(x, v, low, high)};
}

TPU_LOWERING(reflection_pad1d) { return pad_forward(ctx, 1, true); }
TPU_LOWERING(reflection_pad2d) { return pad_forward(ctx, 2, true); }
TPU_LOWERING(reflection_pad3d) { return pad_forward(ctx, 3, true); }
TPU_LOWERING(replication_pad1d) { return pad_forward(ctx, 1, false); }
TPU_LOWERING(replication_pad2d) { return pad_forward(ctx, 2, false); }
TPU_LOWERING(replication_pad3d) { return pad_forward(ctx, 3, false); }
TPU_LOWERING(reflection_pad1d_backward) { return pad_backward(ctx, 1, true); }
TPU_LOWERING(reflection_pad2d_backward) { return pad_backward(ctx, 2, true); }
TPU_LOWERING(reflection_pad3d_backward) { return pad_backward(ctx, 3, true); }
TPU_LOWERING(replication_pad1d_backward) { return pad_backward(ctx, 1, false); }
TPU_LOWERING(replication_pad2d_backward) { return pad_backward(ctx, 2, false); }
TPU_LOWERING(replication_pad3d_backward) { return pad_backward(ctx, 3, false); }

}  // namespace torch_tpu::lowering
