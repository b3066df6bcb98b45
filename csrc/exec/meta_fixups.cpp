#include "exec/meta_fixups.h"

#include "exec/arg_checks.h"

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

}  // namespace

void fix_meta_returns(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                      std::vector<std::optional<lowering::OutputMeta>>& returns) {
  if (batch_norm_eval(schema, args) && returns.size() >= 3) {
    for (size_t i = 1; i <= 2; ++i)
      if (returns[i] && returns[i]->defined) returns[i]->sizes = {0};
  }
  if (auto t = batch_norm_stats_dtype(schema, args); t && returns.size() >= 3) {
    for (size_t i = 1; i <= 2; ++i)
      if (returns[i] && returns[i]->defined) returns[i]->dtype = *t;
  }
}

}  // namespace torch_tpu::exec
