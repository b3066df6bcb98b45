// How the host's malloc keeps memory when XLA:CPU is the device (host_allocator.cpp).
#pragma once

namespace torch_tpu::runtime {

// Whether the user asked for kept host memory (TORCH_TPU_KEEP_HOST_MEMORY=1)
// and did not tune glibc's malloc through the environment themselves.
bool keep_host_memory_requested();

// Before XLA:CPU's client starts (its worker threads pick their malloc arena
// at their first allocation): keep freed memory for reuse instead of handing
// it back to the kernel. Returns whether glibc took every setting.
bool keep_freed_host_memory();

}  // namespace torch_tpu::runtime
