// Keys that describe tensors: the per-op program cache (op_runner.cpp) and
// the graph replay signature (python/replay_bindings.cpp) key a tensor's
// layout the same way, since both must change exactly when a per-op program
// would.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::exec {

void append_int(std::string& k, int64_t v);

// The storages seen so far in one key. Which arguments share a storage
// shapes a program (they become one parameter), so each tensor records the
// position of its storage among them.
using SeenStorages = std::vector<const void*>;

// dtype, sizes, strides, offset, storage bytes, the dtype a tpu storage's
// buffer holds (-1: none yet, or not a tpu tensor), and the position of the
// tensor's storage in `storages` (added if new). `offset_is_operand`: the
// program reads the offset at run time (lowering::offset_is_operand), so
// only a mark that it is one goes in.
void append_tensor_layout(std::string& k, const at::Tensor& t, SeenStorages& storages,
                          bool offset_is_operand = false);

}  // namespace torch_tpu::exec
