// How the host's malloc keeps memory when XLA:CPU is the device (host_allocator.cpp).
#pragma once

namespace torch_tpu::runtime {

// Before XLA:CPU's client starts (its worker threads pick their malloc arena
// at their first allocation): keep freed memory for reuse instead of handing
// it back to the kernel. Only with TORCH_TPU_KEEP_HOST_MEMORY=1, and not
// when the user already tuned glibc's malloc through the environment.
// Returns whether it changed anything.
bool keep_freed_host_memory();

}  // namespace torch_tpu::runtime
