// Device storage: each at::Storage on `tpu` owns one runtime buffer (a 1-D
// array of its elements) behind a synthetic data pointer that is unique,
// stable and never dereferenced.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/ScalarType.h>
#include <ATen/core/TensorBase.h>
#include <c10/core/Storage.h>

#include "runtime/runtime.h"

namespace torch_tpu::device {

// What a storage's DataPtr context points to.
struct StorageBuffer {
  // 1-D array of `dtype` elements covering the storage; null until the
  // storage is first written (it then reads as zeros).
  runtime::BufferRef buffer;
  at::ScalarType dtype = at::ScalarType::Undefined;
  int device = 0;
  size_t nbytes = 0;
};

at::Allocator* allocator();

// Elements of `t`'s dtype that its storage holds (the buffer's length).
inline int64_t storage_numel(const at::TensorBase& t) {
  return static_cast<int64_t>(t.storage().nbytes()) / static_cast<int64_t>(t.element_size());
}

// The buffer record behind a tpu storage.
StorageBuffer& storage_buffer(const c10::Storage& storage);

struct MemoryStats {
  int64_t allocated_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
  int64_t num_ooms = 0;
  int64_t allocated_total = 0;  // bytes ever allocated / freed
  int64_t freed_total = 0;
  int64_t limit = 0;  // device memory: allocations past it raise OutOfMemoryError
  int64_t num_live = 0;  // allocations not yet freed
};
MemoryStats memory_stats(int device);
// Sets the device memory limit in bytes (negative: back to the default,
// TORCH_TPU_HBM_BYTES or half the host's memory on XLA:CPU).
void set_memory_limit(int device, int64_t bytes);
// Raises torch.OutOfMemoryError if `bytes` more would pass the limit (a
// program checks its new outputs before it runs, so a failing op changes
// nothing).
void check_can_allocate(int device, int64_t bytes);
void reset_peak_memory(int device);
// Zeroes the cumulative counters (allocations, frees, bytes, OOMs).
void reset_accumulated_memory(int device);

}  // namespace torch_tpu::device
