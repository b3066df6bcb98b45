// Runs ATen ops on tpu tensors: the boxed PrivateUse1 fallback that looks
// up the op's lowering rule, compiles (once per key) and executes it.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <vector>

namespace torch_tpu::exec {

// Boxed kernel for every op without a dedicated tpu kernel.
void run_lowered_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// A new contiguous tpu tensor (storage not yet written: reads as zeros).
at::Tensor empty_tensor(at::IntArrayRef sizes, at::ScalarType dtype, c10::DeviceIndex device);
// The same with the given dense strides (a channels-last result).
at::Tensor empty_strided_tensor(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype,
                                c10::DeviceIndex device);

struct ProgramCacheStats {
  int64_t programs = 0;  // distinct programs held in memory
  int64_t hits = 0;
  int64_t misses = 0;
};
ProgramCacheStats program_cache_stats();

}  // namespace torch_tpu::exec
