// Fused Eager's automatic buckets for a dim that torch.cat grows from step to
// step (torch_tpu/auto_bucket.py, docs/design.md "Automatic buckets").
#pragma once

#include <ATen/Tensor.h>

#include <functional>

namespace torch_tpu::aten {

// `bound(result, dim)` makes a cat's result a padded BoundedTensor; an empty
// function turns the detection off (every cat then runs as the plain op).
void set_cat_bucketing(std::function<at::Tensor(const at::Tensor&, int64_t)> bound);

}  // namespace torch_tpu::aten
