// Complex construction and conjugation (StableHLO has complex/real/imag but
// no conjugate).
#include "hlo/complex_ops.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

// complex(real, imag): float parts (broadcast) -> complex of matching width.
TPU_LOWERING(complex) {
  // CPU's check: both parts of one dtype (the meta kernel promotes instead).
  at::ScalarType rt = ctx.dtype_of("real"), it = ctx.dtype_of("imag");
  TORCH_CHECK(rt == it, "Expected object of scalar type ", rt, " but got scalar type ", it, " for second argument");
  if (ctx.has("out")) {
    at::ScalarType want = c10::toComplexType(rt), got = ctx.tensor_arg("out").scalar_type();
    TORCH_CHECK(got == want, "Expected object of scalar type ", want, " but got scalar type ", got,
                " for argument 'out'");
  }
  auto ce = element_type(*ctx.out_dtype());
  auto fe = hlo::complex_component(ce);
  auto dims = *ctx.out_sizes();
  Value re = hlo::broadcast_to(hlo::convert(ctx.tensor("real"), fe), dims);
  Value im = hlo::broadcast_to(hlo::convert(ctx.tensor("imag"), fe), dims);
  return {hlo::make_complex(re, im)};
}

// polar(abs, angle) = abs * (cos(angle) + i sin(angle)).
TPU_LOWERING(polar) {
  at::ScalarType at_ = ctx.dtype_of("abs"), gt = ctx.dtype_of("angle");
  TORCH_CHECK(at_ == gt, "Expected object of scalar type ", at_, " but got scalar type ", gt, " for second argument");
  auto ce = element_type(*ctx.out_dtype());
  auto fe = hlo::complex_component(ce);
  auto dims = *ctx.out_sizes();
  Value r = hlo::broadcast_to(hlo::convert(ctx.tensor("abs"), fe), dims);
  Value a = hlo::broadcast_to(hlo::convert(ctx.tensor("angle"), fe), dims);
  return {hlo::make_complex(hlo::mul(r, hlo::unary("cosine", a)), hlo::mul(r, hlo::unary("sine", a)))};
}

// conj_physical: a materialised conjugate (identity for real tensors).
TPU_LOWERING(conj_physical) { return {hlo::conj(ctx.tensor("self"))}; }

}  // namespace torch_tpu::lowering
