// Less common products: _int_mm (int8 GEMM into int32), _weight_int8pack_mm
// (activations times int8 weights with per-row scales) and
// _compute_linear_combination (rows of coefficients times the stacked
// input). Each is one dot_general through matmul_dot, so the float32 matmul
// precision applies as for mm.
#include "lowering/precision.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

// _int_mm(self, mat2): int8 [m, k] x int8 [k, n] -> int32 [m, n] (the meta
// kernel checks shapes and dtypes).
TPU_LOWERING(_int_mm) {
  auto I = ElementType::kI32;
  Value a = hlo::convert(ctx.tensor("self"), I), b = hlo::convert(ctx.tensor("mat2"), I);
  return {matmul_dot(a, b, {{}, {}, {1}, {0}}, I)};
}

// _weight_int8pack_mm(self [m, k], mat2 int8 [n, k], scales [n]):
// (self @ mat2^T) * scales in self's dtype, accumulated in f32 for bf16/f16
// like CPU's kernel.
TPU_LOWERING(_weight_int8pack_mm) {
  at::ScalarType t = ctx.dtype_of("self");
  ElementType acc = t == at::kDouble ? ElementType::kF64 : ElementType::kF32;
  Value a = hlo::convert(ctx.tensor("self"), acc), w = hlo::convert(ctx.tensor("mat2"), acc);
  Value prod = matmul_dot(a, w, {{}, {}, {1}, {1}}, acc);
  Value scales = hlo::broadcast_in_dim(hlo::convert(ctx.tensor("scales"), acc), prod.dims(), {1});
  return {hlo::convert(hlo::mul(prod, scales), element_type(t))};
}

// _compute_linear_combination(input [n, ...], coefficients [m, n]) ->
// [m, ...] in input's dtype: out[i] = sum_j coefficients[i, j] * input[j].
// No meta kernel: shapes are checked here.
TPU_LOWERING(_compute_linear_combination) {
  const at::Tensor& in = ctx.tensor_arg("input");
  const at::Tensor& co = ctx.tensor_arg("coefficients");
  TORCH_CHECK(in.dim() >= 1, "_compute_linear_combination: input must have at least one dimension");
  TORCH_CHECK(co.dim() == 2 && co.size(1) == in.size(0), "_compute_linear_combination: coefficients of shape ",
              co.sizes(), " do not match input of shape ", in.sizes(), " (expected [m, ", in.size(0), "])");
  at::ScalarType t = in.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBool, "\"_compute_linear_combination\" not implemented for 'Bool'");
  ElementType acc = (t == at::kBFloat16 || t == at::kHalf) ? ElementType::kF32 : element_type(t);
  int64_t n = in.size(0), rest = 1;
  for (int64_t d = 1; d < in.dim(); ++d) rest *= in.size(d);
  Value x = hlo::reshape(hlo::convert(ctx.tensor("input"), acc), {n, rest});
  Value c = hlo::convert(ctx.tensor("coefficients"), acc);
  Value r = matmul_dot(c, x, {{}, {}, {1}, {0}}, acc);
  Dims out = in.sizes().vec();
  out[0] = co.size(0);
  return {hlo::convert(hlo::reshape(r, out), element_type(t))};
}

}  // namespace torch_tpu::lowering
