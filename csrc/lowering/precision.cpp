#include "lowering/precision.h"

#include <ATen/Context.h>

#include "runtime/runtime.h"

namespace torch_tpu::lowering {

MatmulPrecision matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::MEDIUM: return MatmulPrecision::kDefault;
    case at::Float32MatmulPrecision::HIGH: return MatmulPrecision::kHigh;
    default: return MatmulPrecision::kHighest;
  }
}

namespace {

hlo::Value round_bf16(hlo::Value x) {
  return hlo::convert(hlo::convert(x, hlo::ElementType::kBF16), hlo::ElementType::kF32);
}

}  // namespace

hlo::Value matmul_dot(hlo::Value a, hlo::Value b, const hlo::DotDims& dd, hlo::ElementType acc) {
  using hlo::ElementType;
  if (acc != ElementType::kF32 || a.element() != ElementType::kF32 || b.element() != ElementType::kF32) {
    bool wide = acc == ElementType::kF32 || acc == ElementType::kF64 || hlo::is_complex(acc);
    return hlo::dot_general(a, b, dd, acc, wide ? "HIGHEST" : "DEFAULT");
  }
  MatmulPrecision p = matmul_precision();
  if (p == MatmulPrecision::kHighest) return hlo::dot_general(a, b, dd, acc, "HIGHEST");
  if (runtime::get().platform().is_tpu())
    return hlo::dot_general(a, b, dd, acc, p == MatmulPrecision::kHigh ? "HIGH" : "DEFAULT");
  // Emulation: products of bf16 values are exact in f32, so f32 dots of
  // bf16-rounded operands are the TPU's bf16 passes.
  hlo::Value a_hi = round_bf16(a), b_hi = round_bf16(b);
  hlo::Value out = hlo::dot_general(a_hi, b_hi, dd, acc, "HIGHEST");
  if (p == MatmulPrecision::kHigh) {
    hlo::Value a_lo = round_bf16(hlo::sub(a, a_hi)), b_lo = round_bf16(hlo::sub(b, b_hi));
    hlo::Value cross = hlo::add(hlo::dot_general(a_hi, b_lo, dd, acc, "HIGHEST"),
                                hlo::dot_general(a_lo, b_hi, dd, acc, "HIGHEST"));
    out = hlo::add(cross, out);
  }
  return out;
}

hlo::Value unfolded_transposed_lhs(hlo::Value lhs, bool transposed_view) {
  if (!transposed_view || lhs.element() != hlo::ElementType::kF32 || !runtime::get().platform().is_cpu())
    return lhs;
  return lhs.builder().emit("optimization_barrier", {lhs}, lhs.type());
}

}  // namespace torch_tpu::lowering
