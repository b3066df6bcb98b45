// Embedding a StableHLO module made elsewhere (jax's lowering of a jax_op,
// torch_tpu/jax_op.py) into one of our programs: its functions become
// private top-level functions of our module under prefixed names, so that
// several embedded modules (and the fused runtime's @f<id> functions) live
// in one module without clashing.
#pragma once

#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::hlo {

struct EmbeddedModule {
  std::string functions;  // the module's functions, renamed and private, one after another
  std::string main;       // the new name of its @main (without '@')
};

// `module_text` is a whole module in MLIR text (jax's `Lowered.as_text()`):
// `module @name attributes {...} {` + `func.func` definitions + `}`. Every
// symbol it defines is renamed `prefix + name`, and every reference to it
// (outside string literals) follows; @main becomes private. The module's
// own attributes (partition counts) are dropped: ours has the same ones.
// Throws c10::Error for anything but a module of functions.
EmbeddedModule embed_module(const std::string& module_text, const std::string& prefix);

// Adds `m`'s functions to `b`'s module (printed after @main by its next
// module_text()) and calls its main on `operands`: a `stablehlo.composite`
// named `name` whose decomposition is that function (XLA inlines it).
std::vector<Value> call_embedded(Builder& b, EmbeddedModule m, const std::string& name,
                                 const std::vector<Value>& operands, const std::vector<TensorType>& results);

// builder.cpp: `text` (top-level functions) goes into `b`'s module if its
// body refers to @callee.
void add_function_text(Builder& b, std::string callee, std::string text);

}  // namespace torch_tpu::hlo
