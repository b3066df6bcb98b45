// Helpers shared by the nn-style lowering families (conv, pool, norm, loss,
// embedding, fold, indexing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "lowering/registry.h"

namespace torch_tpu::lowering {

// The type sums and products are accumulated in: bf16/f16 go through f32,
// as PyTorch's CPU kernels do (the ElementType twin of ew::opmath).
inline ElementType acc_type(ElementType e) {
  return (e == ElementType::kBF16 || e == ElementType::kF16) ? ElementType::kF32 : e;
}

// 0..rank-1 without the dimensions in `skip` (the dims a per-channel value
// is broadcast along, or the window dims of a gather).
inline Dims all_but(int64_t rank, const Dims& skip) {
  Dims out;
  for (int64_t i = 0; i < rank; ++i) {
    bool s = false;
    for (auto d : skip) s |= d == i;
    if (!s) out.push_back(i);
  }
  return out;
}

// The number of elements of dims[lo, hi).
inline int64_t numel_of(const Dims& d, size_t lo = 0, size_t hi = std::numeric_limits<size_t>::max()) {
  int64_t n = 1;
  for (size_t i = lo; i < d.size() && i < hi; ++i) n *= d[i];
  return n;
}

// lo, lo+1, ..., hi-1.
inline Dims range_dims(int64_t lo, int64_t hi) {
  Dims d;
  for (int64_t i = lo; i < hi; ++i) d.push_back(i);
  return d;
}

}  // namespace torch_tpu::lowering
