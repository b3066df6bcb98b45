// PyTorch's inference fast paths of nn.TransformerEncoderLayer,
// nn.TransformerEncoder and nn.MultiheadAttention (eval mode, no autograd)
// on tpu.
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
// TransformerEncoder's sparsity fast path (a padded batch with
// src_key_padding_mask) turns the batch into a nested tensor
// (nested_tensor.cpp), runs each layer on it, and pads the result back with
// zeros. On a nested input the layer here runs the same dense composition
// on the padded batch with the key-padding mask the nested sizes imply, and
// gathers the real positions back into a nested tensor: CPU's nested
// kernels compute those positions with the same masking (its attention
// softmax masks by the nested lengths), and the padded positions, which
// differ, are dropped either way.
#include <ATen/NestedTensorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "aten/nested_tensor.h"

namespace torch_tpu::aten {

namespace {

at::Tensor transformer_encoder_layer_forward_nested(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  nested::check_readable(src, "_transformer_encoder_layer_fwd");
  // TransformerEncoderLayer never passes a mask with a nested input; the
  // nested sizes are the mask.
  TORCH_CHECK_NOT_IMPLEMENTED(!mask.has_value() || !mask->defined(),
                              "_transformer_encoder_layer_fwd: a mask with a nested input is not supported");
  const at::Tensor& sizes = at::native::get_nested_tensor_impl(src)->get_nested_sizes();
  TORCH_CHECK(sizes.size(1) == 2, "_transformer_encoder_layer_fwd: expected a nested tensor of [L_i, ", embed_dim,
              "] components, got ", sizes.size(1), "-d components");
  const int64_t n = sizes.size(0);
  at::Tensor padded = nested::to_padded(src, 0.0, std::nullopt);
  const int64_t len = padded.size(1);
  // Key-padding mask (True = padded) from the host-side lengths.
  at::Tensor key_padding = at::empty({n, len}, at::TensorOptions().dtype(at::kBool));
  bool* m = key_padding.data_ptr<bool>();
  const at::Tensor lengths = sizes.contiguous();
  const int64_t* s = lengths.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j) m[i * len + j] = j >= s[2 * i];
  at::Tensor out = at::native::transformer_encoder_layer_forward(
      padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
      norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
      key_padding.to(padded.device()), /*mask_type=key padding*/ 1);
  return nested::from_padded(out, sizes);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", &at::native::transformer_encoder_layer_forward);
  m.impl("_native_multi_head_attention", &at::native::native_multi_head_attention_cpu);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", &transformer_encoder_layer_forward_nested);
}

}  // namespace torch_tpu::aten
