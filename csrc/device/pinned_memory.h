// Host memory handed out by `Tensor.pin_memory()` (and DataLoader's
// pin_memory=True) when tpu is the accelerator. XLA's clients copy from
// any host buffer, so nothing is page-locked; the allocator only remembers
// which allocations are "pinned", so that `is_pinned()` answers True for
// them, as a CUDA user's code expects after pin_memory().
#pragma once

#include <c10/core/Allocator.h>

namespace torch_tpu::device {

c10::Allocator* pinned_allocator();
// Whether `ptr` is the start of a live allocation of pinned_allocator()
// (PyTorch asks about a storage's data pointer).
bool is_pinned_ptr(const void* ptr);

}  // namespace torch_tpu::device
