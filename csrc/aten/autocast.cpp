// torch.autocast("tpu"): the AutocastPrivateUse1 kernels, with CUDA's op
// policy (PyTorch's aten/src/ATen/autocast_mode.cpp does the same for CUDA,
// XPU and MPS from the op lists in ATen/autocast_mode.h):
//   lower_precision_fp: matmuls and convolutions run in the autocast dtype
//     (bfloat16 by default on tpu);
//   fp32: reductions, losses, norms, softmax, exp/log/pow... run in float32;
//   fp32_set_opt_dtype / fp32_append_dtype: sum, prod, softmax, norm...
//     accumulate in float32;
//   promote: multi-input ops take the widest input type.
// Every other op falls through to the tpu kernels.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_tpu::aten {
namespace {

at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

}  // namespace

using at::Scalar;
using at::ScalarType;
using at::Tensor;
using c10::IntArrayRef;
#if __has_include(<ATen/core/Dimname.h>)
// Named in the op lists of torch 2.11's autocast_mode.h (named tensors are
// gone from 2.13's).
using at::DimnameList;
#endif

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TPU_AUTOCAST_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TPU_AUTOCAST_LOW)
#define TPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TPU_AUTOCAST_FP32)
#define TPU_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define TPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TPU_AUTOCAST_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binary_cross_entropy_banned)));
}

}  // namespace torch_tpu::aten
