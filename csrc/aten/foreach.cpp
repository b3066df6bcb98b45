// Foreach ops to the lowering engine (lowering/foreach.cpp): their
// CompositeExplicitAutograd kernels would otherwise run one program per
// tensor. Only overloads whose arguments the engine lowers (tensor lists,
// Scalars, 0-dim tensors) are listed; Scalar[] overloads keep PyTorch's
// per-tensor path.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

namespace {

// Foreach ops have no ADInplaceOrView kernel: PyTorch's per-tensor path bumps
// each tensor's version through the single-tensor in-place op it calls, and
// CUDA's fused kernels bump them by hand. So must we, or autograd would not
// see that a saved tensor changed (an optimizer step between forward and
// backward would give gradients of the new values instead of an error).
void run_lowered_inplace_foreach(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  size_t nargs = op.schema().arguments().size();
  c10::List<at::Tensor> self = (*stack)[stack->size() - nargs].toTensorList();
  exec::run_lowered_op(op, stack);
  for (const at::Tensor& t : self) t.unsafeGetTensorImpl()->bump_version();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto engine = [] { return torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>(); };
  auto inplace = [] { return torch::CppFunction::makeFromBoxedFunction<&run_lowered_inplace_foreach>(); };
  for (const char* op : {"_foreach_add", "_foreach_sub"}) {
    for (const char* ov : {".Scalar", ".List"}) {
      m.impl((std::string(op) + ov).c_str(), engine());
      m.impl((std::string(op) + "_" + ov).c_str(), inplace());
    }
  }
  for (const char* op : {"_foreach_mul", "_foreach_div"}) {
    for (const char* ov : {".Scalar", ".List", ".Tensor"}) {
      m.impl((std::string(op) + ov).c_str(), engine());
      m.impl((std::string(op) + "_" + ov).c_str(), inplace());
    }
  }
  for (const char* op : {"_foreach_addcmul", "_foreach_addcdiv", "_foreach_lerp"}) {
    m.impl((std::string(op) + ".Scalar").c_str(), engine());
    m.impl((std::string(op) + "_.Scalar").c_str(), inplace());
  }
  m.impl("_foreach_lerp.List", engine());
  m.impl("_foreach_lerp_.List", inplace());
  for (const char* op : {"_foreach_sqrt", "_foreach_neg", "_foreach_exp", "_foreach_abs"}) {
    m.impl(op, engine());
    m.impl((std::string(op) + "_").c_str(), inplace());
  }
  m.impl("_foreach_norm.Scalar", engine());
}

}  // namespace torch_tpu::aten
