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

void native_batch_norm_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // input, weight, bias, running_mean, running_var, training, momentum, eps
  const size_t n = 8;
  auto& s = *stack;
  auto arg = [&](size_t i) -> c10::IValue& { return s[s.size() - n + i]; };
  bool training = arg(5).toBool();
  bool has_running = arg(3).isTensor() && arg(3).toTensor().defined() && arg(4).isTensor() &&
                     arg(4).toTensor().defined();
  if (!training || !has_running) {
    exec::run_lowered_op(op, stack);
    return;
  }
  at::Tensor input = arg(0).toTensor();
  std::optional<at::Tensor> weight = arg(1).isTensor() ? std::optional<at::Tensor>(arg(1).toTensor()) : std::nullopt;
  std::optional<at::Tensor> bias = arg(2).isTensor() ? std::optional<at::Tensor>(arg(2).toTensor()) : std::nullopt;
  at::Tensor rm = arg(3).toTensor(), rv = arg(4).toTensor();
  double momentum = arg(6).toDouble(), eps = arg(7).toDouble();
  torch::jit::drop(*stack, n);
  auto [out, mean, invstd] = at::_native_batch_norm_legit(input, weight, bias, rm, rv, training, momentum, eps);
  stack->emplace_back(std::move(out));
  stack->emplace_back(std::move(mean));
  stack->emplace_back(std::move(invstd));
}

// native_batch_norm.out: the same in-place update of the running stats in
// training mode, through _native_batch_norm_legit.out (without it the
// running stats stayed stale).
void native_batch_norm_out_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // input, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd
  const size_t n = 11;
  auto& s = *stack;
  auto arg = [&](size_t i) -> c10::IValue& { return s[s.size() - n + i]; };
  bool training = arg(5).toBool();
  bool has_running = arg(3).isTensor() && arg(3).toTensor().defined() && arg(4).isTensor() &&
                     arg(4).toTensor().defined();
  if (!training || !has_running) {
    exec::run_lowered_op(op, stack);
    return;
  }
  at::Tensor input = arg(0).toTensor();
  std::optional<at::Tensor> weight = arg(1).isTensor() ? std::optional<at::Tensor>(arg(1).toTensor()) : std::nullopt;
  std::optional<at::Tensor> bias = arg(2).isTensor() ? std::optional<at::Tensor>(arg(2).toTensor()) : std::nullopt;
  at::Tensor rm = arg(3).toTensor(), rv = arg(4).toTensor();
  at::Tensor out = arg(8).toTensor(), save_mean = arg(9).toTensor(), save_invstd = arg(10).toTensor();
  double momentum = arg(6).toDouble(), eps = arg(7).toDouble();
  torch::jit::drop(*stack, n);
  at::_native_batch_norm_legit_out(out, save_mean, save_invstd, input, weight, bias, rm, rv, training, momentum, eps);
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
