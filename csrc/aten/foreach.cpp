// Foreach ops to the lowering engine (lowering/foreach.cpp): their
// CompositeExplicitAutograd kernels would otherwise run one program per
// tensor. Only overloads whose arguments the engine lowers (tensor lists,
// Scalars, 0-dim tensors) are listed; Scalar[] overloads keep PyTorch's
// per-tensor path.
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto engine = [] { return torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>(); };
  for (const char* op : {"_foreach_add", "_foreach_sub"}) {
    for (const char* ov : {".Scalar", ".List"}) {
      m.impl((std::string(op) + ov).c_str(), engine());
      m.impl((std::string(op) + "_" + ov).c_str(), engine());
    }
  }
  for (const char* op : {"_foreach_mul", "_foreach_div"}) {
    for (const char* ov : {".Scalar", ".List", ".Tensor"}) {
      m.impl((std::string(op) + ov).c_str(), engine());
      m.impl((std::string(op) + "_" + ov).c_str(), engine());
    }
  }
  for (const char* op : {"_foreach_addcmul", "_foreach_addcdiv", "_foreach_lerp"}) {
    m.impl((std::string(op) + ".Scalar").c_str(), engine());
    m.impl((std::string(op) + "_.Scalar").c_str(), engine());
  }
  m.impl("_foreach_lerp.List", engine());
  m.impl("_foreach_lerp_.List", engine());
  for (const char* op : {"_foreach_sqrt", "_foreach_neg", "_foreach_exp", "_foreach_abs"}) {
    m.impl(op, engine());
    m.impl((std::string(op) + "_").c_str(), engine());
  }
  m.impl("_foreach_norm.Scalar", engine());
}

}  // namespace torch_tpu::aten
