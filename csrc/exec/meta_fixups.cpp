#include "exec/meta_fixups.h"

#include "exec/arg_checks.h"

#include <c10/core/MemoryFormat.h>

#include <optional>
#include <string>

namespace torch_tpu::exec {

namespace {

bool defined_tensor(const c10::IValue* v) { return v && v->isTensor() && v->toTensor().defined(); }

// Batch norm in eval mode with running stats: CPU returns save_mean and
// save_invstd as empty [0] tensors (nothing was computed from the batch);
// the meta kernels give them [C].
bool batch_norm_eval(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  const std::string& op = schema.name();
  if (op == "aten::_native_batch_norm_legit_no_training") return true;
  if (op == "aten::_batch_norm_no_update") return defined_tensor(find_arg(schema, args, "running_mean"));
  if (op != "aten::native_batch_norm" && op != "aten::_native_batch_norm_legit") return false;
  const c10::IValue* training = find_arg(schema, args, "training");
  return training && training->isBool() && !training->toBool() &&
         defined_tensor(find_arg(schema, args, "running_mean"));
}

bool is_batch_norm(const std::string& op) {
  return op == "aten::native_batch_norm" || op == "aten::_native_batch_norm_legit" ||
         op == "aten::_native_batch_norm_legit_no_training" || op == "aten::_native_batch_norm_legit_functional" ||
         op == "aten::_batch_norm_with_update" || op == "aten::_batch_norm_with_update_functional" ||
         op == "aten::_batch_norm_no_update";
}

// CPU keeps save_mean / save_invstd in a bfloat16 / half input's own dtype
// unless a parameter is float (mixed precision); the meta kernels always
// give float.
std::optional<at::ScalarType> batch_norm_stats_dtype(const c10::FunctionSchema& schema,
                                                     const std::vector<c10::IValue>& args) {
  if (!is_batch_norm(schema.name())) return std::nullopt;
  const c10::IValue* input = find_arg(schema, args, "input");
  if (!defined_tensor(input)) return std::nullopt;
  at::ScalarType t = input->toTensor().scalar_type();
  if (t != at::kBFloat16 && t != at::kHalf) return std::nullopt;
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    const c10::IValue* p = find_arg(schema, args, name);
    if (defined_tensor(p) && p->toTensor().scalar_type() != t) return std::nullopt;
  }
  return t;
}

// A convolution's results (output; grad_input and grad_weight) are
// channels-last when its input or weight suggests it, as CPU's and CUDA's
// convolutions choose (thnn/mkldnn/cudnn "use channels last"); the meta
// *_overrideable ops have no meta kernel, and the rules' values are laid
// out contiguously.
at::MemoryFormat conv_result_format(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                    size_t result) {
  const std::string& op = schema.name();
  size_t results = op == "aten::convolution_overrideable" ? 1 : op == "aten::convolution_backward_overrideable" ? 2 : 0;
  if (result >= results) return at::MemoryFormat::Contiguous;
  for (const char* name : {"input", "weight"}) {
    const c10::IValue* t = find_arg(schema, args, name);
    if (!defined_tensor(t)) continue;
    auto f = t->toTensor().suggest_memory_format();
    if (f == at::MemoryFormat::ChannelsLast || f == at::MemoryFormat::ChannelsLast3d) return f;
  }
  return at::MemoryFormat::Contiguous;
}

// Result strides of memory format `f` (contiguous: none).
std::vector<int64_t> format_strides(at::MemoryFormat f, const std::vector<int64_t>& sizes) {
  if (f == at::MemoryFormat::ChannelsLast && sizes.size() == 4) return c10::get_channels_last_strides_2d(sizes);
  if (f == at::MemoryFormat::ChannelsLast3d && sizes.size() == 5) return c10::get_channels_last_strides_3d(sizes);
  return {};
}

// Ops whose CPU kernels lay their first result out by the input's
// suggested memory format (channels-last or contiguous) where the meta
// kernels keep any input layout (a transposed (N, C, L) batch norm input).
bool result_follows_suggested_format(const std::string& op) {
  return is_batch_norm(op) || op == "aten::native_batch_norm_backward" || op == "aten::batch_norm_backward";
}

// Ops whose CPU kernels give contiguous results where the meta kernels keep
// the input's layout: normal with a tensor mean (empty_like(mean,
// contiguous) on every device) and real FFTs (the meta kernels follow
// cuFFT's layouts; CPU's results of rfft2/rfftn are contiguous).
bool result_contiguous_on_cpu(const std::string& op) {
  return op == "aten::normal" || op == "aten::_fft_r2c" || op == "aten::_fft_c2r";
}

// multi_margin_loss(reduction='none') of a 0-d target (one sample): CPU's
// result is 0-d, the meta kernel's [1].
bool unbatched_margin_loss(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  if (schema.name() != "aten::multi_margin_loss") return false;
  const c10::IValue* target = find_arg(schema, args, "target");
  const c10::IValue* reduction = find_arg(schema, args, "reduction");
  return defined_tensor(target) && target->toTensor().dim() == 0 && reduction && reduction->isInt() &&
         reduction->toInt() == 0;
}

}  // namespace

void fix_meta_returns(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                      std::vector<std::optional<lowering::OutputMeta>>& returns) {
  if (batch_norm_eval(schema, args) && returns.size() >= 3) {
    for (size_t i = 1; i <= 2; ++i)
      if (returns[i] && returns[i]->defined) returns[i]->sizes = {0};
  }
  if (unbatched_margin_loss(schema, args) && !returns.empty() && returns[0]) {
    returns[0]->sizes = {};
    returns[0]->strides.clear();
  }
  if (!returns.empty() && returns[0] && !returns[0]->strides.empty()) {
    if (result_contiguous_on_cpu(schema.name())) {
      returns[0]->strides.clear();
    } else if (result_follows_suggested_format(schema.name())) {
      const c10::IValue* input = find_arg(schema, args, "input");
      if (defined_tensor(input))
        returns[0]->strides = format_strides(input->toTensor().suggest_memory_format(), returns[0]->sizes);
    }
  }
  if (auto t = batch_norm_stats_dtype(schema, args); t && returns.size() >= 3) {
    for (size_t i = 1; i <= 2; ++i)
      if (returns[i] && returns[i]->defined) returns[i]->dtype = *t;
  }
}

std::vector<int64_t> cpu_result_strides(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                        size_t result, const std::vector<int64_t>& sizes) {
  return format_strides(conv_result_format(schema, args, result), sizes);
}

}  // namespace torch_tpu::exec
