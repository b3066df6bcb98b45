// Helpers shared by the sorting (sort.cpp) and scan (scan.cpp) rules.
#pragma once

#include <functional>
#include <vector>

#include "lowering/registry.h"

namespace torch_tpu::lowering::sortscan {

// Stable sort of `x` along `dim` with PyTorch's order: NaN above every
// number, -0.0 equal to +0.0; descending reverses the order but ties keep
// their input order. Returns {values, int64 indices into dim}. Rank 0 and
// empty inputs work.
std::pair<Value, Value> sort_with_indices(Value x, int64_t dim, bool descending);

// Combines an earlier prefix (a) with the next elements (b): associative,
// returns as many values as each side has.
using Combine = std::function<std::vector<Value>(const std::vector<Value>& a, const std::vector<Value>& b)>;

// Inclusive scan along `dim` of the tuple `xs` (same shapes). `ids` are rank-0
// left identities of `combine` (combine(ids, b) == b), one per element of xs.
std::vector<Value> scan(std::vector<Value> xs, int64_t dim, const std::vector<Value>& ids, const Combine& combine);

// x[..., k[...]] along the LAST dimension: x is [..., n], k is [...] (int64,
// in range); result is [...].
Value take_last(Value x, Value k);

// `x` with dimension `dim` moved to the end.
Value move_to_last(Value x, int64_t dim);

}  // namespace torch_tpu::lowering::sortscan
