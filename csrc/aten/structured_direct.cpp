// Structured ops' functional overloads (add.Tensor, mul, tanh, ...) sent
// straight to the lowering engine; also a few elementwise composites
// (exec/direct_composites.h).
//
// Without this, such an overload reaches a PrivateUse1 tensor through
// PyTorch's CompositeExplicitAutogradNonFunctional wrapper: it builds a
// TensorIterator on the real tensors for the op's meta function, allocates
// the output through the dispatcher and calls the `out=` overload, which
// then reaches the boxed fallback. The engine does all of that itself (the
// meta call once per program key, the output with the meta kernel's
// strides, exec/op_runner.cpp), so the wrapper was a second dispatch and a
// second shape computation on every call of the commonest ops.
//
// Registered at module load, after every static registration, for each
// functional overload that has such a wrapper, an out= overload of the same
// arguments, a lowering rule, a meta kernel and no tpu kernel of its own.
// On a miss the engine runs the wrapper itself on meta tensors, so CPU's
// C++ meta function still checks the call and lays out the result
// (run_meta in exec/op_runner.cpp). TORCH_TPU_DIRECT_STRUCTURED=0 keeps
// PyTorch's wrappers.
#include "aten/structured_direct.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/direct_composites.h"
#include "exec/op_runner.h"
#include "lowering/registry.h"

namespace torch_tpu::aten {

namespace {

// The out= overload with the functional one's arguments plus outs, one per
// result (add.Tensor -> add.out, max.dim -> max.dim_max).
std::optional<c10::OperatorHandle> matching_out(const c10::FunctionSchema& f,
                                                const std::vector<c10::OperatorHandle>& overloads) {
  for (const auto& o : overloads) {
    const auto& s = o.schema();
    const auto& args = s.arguments();
    size_t outs = 0;
    for (const auto& a : args) outs += a.is_out();
    if (outs == 0 || outs != f.returns().size() || args.size() != f.arguments().size() + outs) continue;
    bool same = true;
    for (size_t i = 0; i < f.arguments().size() && same; ++i)
      same = !args[i].is_out() && args[i].name() == f.arguments()[i].name() &&
             *args[i].type() == *f.arguments()[i].type();
    if (same) return o;
  }
  return std::nullopt;
}

}  // namespace

int register_structured_direct() {
  static int count = -1;
  if (count >= 0) return count;
  count = 0;
  const char* env = std::getenv("TORCH_TPU_DIRECT_STRUCTURED");
  if (env && std::strcmp(env, "0") == 0) return count;
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                        __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  std::unordered_map<std::string, std::vector<c10::OperatorHandle>> by_name;
  for (const auto& name : dispatcher.getAllOpNames())
    if (name.name.rfind("aten::", 0) == 0)
      if (auto op = dispatcher.findOp(name)) by_name[name.name].push_back(*op);
  for (const auto& [name, overloads] : by_name) {
    std::string base = name.substr(6);
    if (lowering::find_rule(base) == nullptr) continue;
    for (const auto& op : overloads) {
      // Functional overloads only: in-place ones keep PyTorch's wrapper,
      // whose in-place checks (self's shape and dtype fixed) no out=
      // overload's meta kernel makes.
      const auto& schema = op.schema();
      if (exec::direct_kind(op) == exec::DirectKind::kNone || !op.hasKernelForDispatchKey(c10::DispatchKey::Meta) ||
          op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
          op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse3))  // the engine's meta route (op_runner.cpp)
        continue;
      if (!matching_out(schema, overloads)) continue;
      const auto& overload = schema.overload_name();
      std::string full = overload.empty() ? base : base + "." + overload;
      lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
      ++count;
    }
  }
  return count;
}

}  // namespace torch_tpu::aten
