// Constant fills of a whole tensor (`zero_`, `fill_.Scalar`: what
// torch.zeros/ones/full/zeros_like and optimizer state creation become)
// without a program: the value is written on the host and the buffer handed
// to the device (Runtime::filled), so a fill of a shape never seen before
// compiles nothing (an XLA program is per shape; docs/design.md, "Constant
// fills"). Strict and Debug Eager only: in Fused Eager a fill stays in its
// trace, where XLA folds the constant into its readers. Views that do not
// cover their storage keep the program path (they must keep the rest).
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <c10/core/Scalar.h>

#include <cstdint>
#include <vector>

namespace torch_tpu::exec {

enum class FillKind : uint8_t { kNone, kZero, kScalar };
// Worked out once per op (op_runner's per-op facts).
FillKind fill_kind(const c10::FunctionSchema& schema);

// Runs the fill on the host path and pushes its return if the call
// qualifies (a tpu `self` covering its storage, not Fused Eager, no graph
// capture); false: the caller takes the program path. The argument checks
// (exec/arg_checks.h) have run.
bool run_host_fill(FillKind kind, const std::vector<c10::IValue>& args, int device, torch::jit::Stack* stack);

// Fills made so far on the host path (torch_tpu.compile_cache_stats()["host_fills"]).
int64_t host_fill_count();

// `s` converted to `dtype` as the op engine's uploaded scalars are, into
// `bytes` (the element's size of them written, the rest left alone).
void scalar_bytes(const c10::Scalar& s, at::ScalarType dtype, uint8_t bytes[16]);

}  // namespace torch_tpu::exec
