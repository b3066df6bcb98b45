// Normalization / loss ops whose CompositeExplicitAutograd kernels would
// decompose them on tpu (into slower or unlowered pieces): sent straight to
// the lowering engine. native_batch_norm mutates its running stats without
// saying so in its schema; in training mode it is routed through
// _native_batch_norm_legit, whose schema marks them mutable, so the engine
// writes them back.
#include <ATen/ops/_native_batch_norm_legit.h>
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

namespace {

// native_batch_norm's leading arguments: input, weight, bias, running_mean,
// running_var, training, momentum, eps.
struct BatchNormArgs {
  at::Tensor input;
  std::optional<at::Tensor> weight, bias;
  at::Tensor running_mean, running_var;
  bool training;
  double momentum, eps;

  // Read from the top `n` entries of the stack (n counts the out= tensors).
  BatchNormArgs(const torch::jit::Stack& s, size_t n) {
    auto arg = [&](size_t i) -> const c10::IValue& { return s[s.size() - n + i]; };
    auto optional = [](const c10::IValue& v) {
      return v.isTensor() && v.toTensor().defined() ? std::optional<at::Tensor>(v.toTensor()) : std::nullopt;
    };
    input = arg(0).toTensor();
    weight = optional(arg(1));
    bias = optional(arg(2));
    if (auto rm = optional(arg(3))) running_mean = *rm;
    if (auto rv = optional(arg(4))) running_var = *rv;
    training = arg(5).toBool();
    momentum = arg(6).toDouble();
    eps = arg(7).toDouble();
  }
  // Training with running stats: the case whose write-back the schema hides.
  bool updates_running_stats() const { return training && running_mean.defined() && running_var.defined(); }
};

void native_batch_norm_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  BatchNormArgs a(*stack, 8);
  if (!a.updates_running_stats()) {
    exec::run_lowered_op(op, stack);
    return;
  }
  torch::jit::drop(*stack, 8);
  auto [out, mean, invstd] = at::_native_batch_norm_legit(a.input, a.weight, a.bias, a.running_mean, a.running_var,
                                                          a.training, a.momentum, a.eps);
  stack->emplace_back(std::move(out));
  stack->emplace_back(std::move(mean));
  stack->emplace_back(std::move(invstd));
}

// native_batch_norm.out (+ out, save_mean, save_invstd): the same update
// through _native_batch_norm_legit.out (without it the running stats
// stayed stale).
void native_batch_norm_out_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = 11;
  BatchNormArgs a(*stack, n);
  if (!a.updates_running_stats()) {
    exec::run_lowered_op(op, stack);
    return;
  }
  auto& s = *stack;
  at::Tensor out = s[s.size() - 3].toTensor(), save_mean = s[s.size() - 2].toTensor(),
             save_invstd = s[s.size() - 1].toTensor();
  torch::jit::drop(*stack, n);
  at::_native_batch_norm_legit_out(out, save_mean, save_invstd, a.input, a.weight, a.bias, a.running_mean,
                                   a.running_var, a.training, a.momentum, a.eps);
  stack->emplace_back(out);
  stack->emplace_back(save_mean);
  stack->emplace_back(save_invstd);
}

// The meta kernel gives a 1-D input's unreduced loss shape [1]; CPU gives a
// 0-dim tensor.
void multilabel_margin_loss_forward_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // self, target, reduction
  auto& s = *stack;
  bool one_d = s[s.size() - 3].toTensor().dim() <= 1 && s[s.size() - 1].toInt() == 0;
  exec::run_lowered_op(op, stack);
  if (one_d) {
    auto& out = s[s.size() - 2];
    out = out.toTensor().reshape({});
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", torch::CppFunction::makeFromBoxedFunction<&native_batch_norm_boxed>());
  m.impl("native_batch_norm.out", torch::CppFunction::makeFromBoxedFunction<&native_batch_norm_out_boxed>());
  m.impl("multilabel_margin_loss_forward",
         torch::CppFunction::makeFromBoxedFunction<&multilabel_margin_loss_forward_boxed>());
  auto engine = [&](const char* name) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
  };
  engine("_native_batch_norm_legit_no_training");
  engine("_native_batch_norm_legit_functional");
  engine("_batch_norm_with_update_functional");
  engine("_batch_norm_no_update");
  engine("native_group_norm");
  engine("binary_cross_entropy_with_logits");
  engine("soft_margin_loss");
  engine("_safe_softmax");
}

}  // namespace torch_tpu::aten
