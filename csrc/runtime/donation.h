// Buffer donation for fused programs.
//
// XLA writes every result of a program into a fresh buffer unless the
// program says a parameter's buffer may be reused for it
// (`tf.aliasing_output`) and the caller gives that buffer up. On XLA:CPU a
// fresh buffer costs a page fault per 4 KiB on first write: updating 200 MB
// in place runs about 8x faster than into new memory. A fused trace knows
// which of its parameters nobody else holds (their storage was given a new
// buffer by an in-place op, or died): those are donated to results of the
// same type.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::runtime {

// Buffers smaller than this are neither donated nor recycled: a fresh
// 64 KiB costs 16 page faults, not worth a program variant.
constexpr int64_t kMinDonatedBytes = 64 << 10;

// Bytes the buffer occupies: XLA stores each element in whole bytes (a
// bool, element_bits 1, takes one byte), so a bool tensor is not sized at
// an eighth of its memory by the donation and recycling thresholds.
inline int64_t byte_size(const hlo::TensorType& t) { return t.numel() * ((hlo::element_bits(t.element) + 7) / 8); }

// (parameter index, result index) pairs: result written into the parameter's buffer.
using Aliases = std::vector<std::pair<int, int>>;

// Pairs each donatable parameter with the first unpaired result of exactly
// its type ("tensor<...>" text), in parameter order.
Aliases pick_aliases(const std::vector<bool>& donatable, const std::vector<std::string>& param_types,
                     const std::vector<std::string>& result_types);

// `module` with the aliases written on its @main parameters.
std::string with_aliases(const std::string& module, const Aliases& aliases);

// Appends the aliases to a program cache key.
void append_aliases(std::string& key, const Aliases& aliases);

// Splits "tensor<2xf32>, tensor<complex<f32>>" (or "%a: T, %b: T") at its
// top-level commas.
std::vector<std::string> split_types(const std::string& list);

}  // namespace torch_tpu::runtime
