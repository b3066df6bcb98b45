// tpu_dist: the c10d backend for tpu tensors. Each collective is a
// StableHLO program replicated over the group's devices (programs.h), run
// by XLA with this process's local buffer; nothing of ours carries bytes.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace torch_tpu::distributed {

// global_ranks: the job rank of each group rank (empty: the whole job).
c10::intrusive_ptr<c10d::Backend> make_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                               std::vector<int64_t> global_ranks, std::chrono::milliseconds timeout,
                                               std::string group_name);

}  // namespace torch_tpu::distributed
