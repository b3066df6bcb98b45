// Loop bodies recorded as program text (docs/design.md, "Loops as one
// stablehlo.while"): torch's `scan` and `while_loop` on tpu tensors run their
// body once on placeholders while the mode runtime records its ops, as
// Fused Eager would, into a trace of their own that never runs. The trace
// becomes a module whose @main maps the placeholders (and whatever else the
// body read) to the body's results; exec/region_loop.* builds the loop
// around it. Implemented by the mode runtime (fusing_runtime.cpp). Lock held
// by callers (GIL); one thread.
#pragma once

#include <string>
#include <vector>

#include "hlo/types.h"
#include "runtime/deferred_checks.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

// Sets `device`'s pending trace and deferred-check flags aside and records
// the ops issued from now on into a new region trace (regions nest).
void region_begin(int device);

// A value standing for the loop's `index`-th input inside the region being
// recorded: ops read it as a parameter of the body; anything else that
// reads it raises.
BufferRef region_placeholder(const hlo::TensorType& type, int device, int index);

struct RegionTrace {
  std::string refused;                   // why the body cannot be a loop body; empty when it can
  std::string text;                      // module: @main(params) -> (results)
  std::vector<int> param_arg;            // per parameter: its placeholder's index, or -1
  std::vector<hlo::TensorType> param_types;
  std::vector<BufferRef> outside;        // the parameters that are no placeholder, in order
  std::vector<bool> outside_scalar;      // per outside value: an uploaded scalar operand (a graph's constant)
  std::vector<hlo::TensorType> result_types;
  // The body's deferred-check flags (an index range, ...) are its last
  // results, one per check here: a loop keeps each flag's first failure and
  // hands it to defer_check after it ran.
  std::vector<CheckRef> checks;
};

// Stops recording and puts the device's trace and flags back. `outputs` must
// be values the region computed (the body's results). The region's values
// raise when read afterwards. Refused (not thrown) when the body read a value
// on the host, synchronized or ran a replay.
RegionTrace region_end(int device, const std::vector<BufferRef>& outputs);

// The body raised: drops the region and puts the device's trace back.
void region_abort(int device);

}  // namespace torch_tpu::runtime
