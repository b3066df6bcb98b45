// jax_op (torch_tpu/jax_op.py): a custom op `tpu_jax::<name>(Tensor[]
// tensors, str spec) -> Tensor[]` whose program is jax's own lowering of a
// jax function, embedded into an ordinary op program (hlo/embed.h). The
// op then runs through the same engine as ATen ops: program cache keyed by
// the tensors' layouts and the spec string, views read from storage, Strict
// and Fused Eager, torch.compile graphs, replays.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::lowering {

// Produces the StableHLO module (jax's text) of op `name` for the static
// arguments `spec` and these input types. Set once by the Python package:
// the jax tracing itself is Python.
using JaxLowerer =
    std::function<std::string(const std::string& name, const std::string& spec, const std::vector<hlo::TensorType>&)>;
void set_jax_lowerer(JaxLowerer lowerer);

// Registers the lowering rule for `tpu_jax::<name>`; raises if a rule of
// that name exists (rules are found by the name without namespace).
void register_jax_op(const std::string& name);

}  // namespace torch_tpu::lowering
