// torch_tpu.export (torch_tpu/export.py): an exported program's graph runs
// once through the eager engine in Fused Eager under a capture
// (graph_replay.h, keep_text), so its StableHLO is built by the same
// lowering rules as every eager op and compiled graph. This turns that
// fused program, whose parameters are flat storage buffers, into a
// self-contained module: @main takes the user inputs in their shapes,
// holds the weights (and Scalar constants) as dense constants, and returns
// the outputs in their shapes.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "exec/graph_replay.h"

namespace torch_tpu::exec {

// `inputs`: the capture's inputs; `is_arg[i]`: input i is an argument of
// the exported @main (a user input, contiguous, owning its storage),
// otherwise a constant baked from its current value (a weight).
std::string export_module(const GraphReplay& r, const std::vector<at::Tensor>& inputs,
                          const std::vector<bool>& is_arg);

}  // namespace torch_tpu::exec
