// PyTorch's inference fast paths of nn.TransformerEncoderLayer and
// nn.MultiheadAttention (eval mode, no autograd) on tpu.
//
// _transformer_encoder_layer_fwd and _native_multi_head_attention have
// CPU and CUDA kernels only. PyTorch's CPU kernels for them
// (at::native::transformer_encoder_layer_forward,
// native_multi_head_attention_cpu) are device-generic compositions of ATen
// ops (_transform_bias_rescale_qkv, bmm, _masked_softmax, layer_norm,
// linear, ...), so the tpu kernels are those same functions: every op they
// call dispatches back to tpu and is lowered, and the result is the op
// sequence CPU runs.
//
// _nested_tensor_from_mask_left_aligned: TransformerEncoder asks it whether
// a padded batch with src_key_padding_mask can be turned into a nested
// tensor for its sparsity fast path. tpu has no nested tensors
// (NestedTensorPrivateUse1 kernels), so the answer for tpu tensors is no,
// and TransformerEncoder takes its documented alternative, the padded path
// (each layer still on its own fast path). That path is what CPU computes
// with enable_nested_tensor=False: equal to CPU's nested path at every
// unpadded position; at padded positions CPU's nested path writes zeros
// and the padded path the layer's values there, which every consumer masks.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <torch/library.h>

namespace torch_tpu::aten {

namespace {

bool nested_tensor_from_mask_left_aligned(const at::Tensor&, const at::Tensor&) { return false; }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", &at::native::transformer_encoder_layer_forward);
  m.impl("_native_multi_head_attention", &at::native::native_multi_head_attention_cpu);
  m.impl("_nested_tensor_from_mask_left_aligned", &nested_tensor_from_mask_left_aligned);
}

}  // namespace torch_tpu::aten
