// Elementwise ops whose functional overload PyTorch implements as a
// CompositeExplicitAutograd kernel that resizes an empty tensor through the
// `out=` overload (abs, isinf, logical_and, ...): the out= meta kernels
// resize contiguously, where CPU's TensorIterator lays the result out like
// its inputs (a transposed or channels-last input). aten/structured_direct.cpp
// registers their functional overloads to the engine, whose meta step runs
// that composite on meta tensors for CPU's checks and types, then the
// functional overload's own meta kernel for the layout (op_runner.cpp).
// A short fixed list: the class as a whole (145 overloads with an out=
// form) also holds factories and decompositions with logic of their own.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <string_view>

namespace torch_tpu::exec {

inline bool is_direct_composite(std::string_view op) {  // "aten::abs"
  for (std::string_view name : {"aten::abs", "aten::isinf", "aten::logical_and", "aten::logical_or",
                                "aten::logical_xor", "aten::logical_not", "aten::complex", "aten::polar",
                                "aten::deg2rad", "aten::rad2deg"})
    if (op == name) return true;
  return false;
}

// How the engine takes a functional overload in place of PyTorch's wrapper
// kernel for backends without one (aten/structured_direct.cpp registers
// it; op_runner.cpp's meta step runs that wrapper on meta tensors for
// CPU's checks and types).
enum class DirectKind {
  kNone,        // not taken this way
  kComposite,   // one of the ops above (its CompositeExplicitAutograd kernel)
  kStructured,  // a structured op (its CompositeExplicitAutogradNonFunctional kernel)
};
inline DirectKind direct_kind(const c10::OperatorHandle& op) {
  if (op.schema().is_mutable()) return DirectKind::kNone;
  if (is_direct_composite(op.schema().name()) &&
      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))
    return DirectKind::kComposite;
  if (op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
    return DirectKind::kStructured;
  return DirectKind::kNone;
}

}  // namespace torch_tpu::exec
