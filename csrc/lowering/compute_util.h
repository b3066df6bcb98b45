// Helpers shared by the nn-style lowering families (conv, pool, norm, loss,
// embedding, fold, indexing).
#pragma once

#include <cstdint>

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

}  // namespace torch_tpu::lowering
