// The opt-in CPU fallback (docs/design.md, "CPU fallback"): an op with no
// lowering rule runs on the CPU through PyTorch's own boxed
// at::native::cpu_fallback (the one XLA and LTC use), which copies tensor
// arguments to the host, runs the CPU kernel and copies results back,
// writing in-place and out= results through the original (possibly view)
// tensors. Off by default; TORCH_TPU_CPU_FALLBACK=1 or
// torch_tpu.cpu_fallback(True) turns it on.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu::exec {

bool cpu_fallback_enabled();
void set_cpu_fallback(bool on);

// Runs `op` (its arguments on `stack`) on the CPU, counting it and warning
// the first time each op falls back.
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Ops that fell back, with how many calls each; reset clears the counts
// (and the warnings, which then show again).
std::map<std::string, int64_t> cpu_fallback_stats();
void reset_cpu_fallback_stats();

}  // namespace torch_tpu::exec
