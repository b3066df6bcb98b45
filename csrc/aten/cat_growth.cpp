// aten::cat on tpu: the lowered op, then, with automatic buckets on
// (cat_growth.h), the check that decides whether its result is a dim grown
// from step to step. A cat whose first non-empty piece is itself the result
// of a cat along the same dim, made before the last trace ran (the next step
// of a loop: a KV cache, generate's input_ids and attention_mask), in Fused
// Eager with autograd off and outside a graph capture, hands its result to
// the Python side, which returns it padded to a bucket (a BoundedTensor).
// Every other cat only notes its result in a table here. In C++ so that the
// cats of every Fused Eager program (rotary embeddings, the padded rules'
// own joins) cost the plain op plus a table lookup, not a Python call.
#include "aten/cat_growth.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "exec/op_runner.h"
#include "runtime/modes.h"

namespace torch_tpu::aten {

namespace {

struct Grown {
  c10::weak_intrusive_ptr<c10::TensorImpl> impl;  // the address may be reused once it dies
  int64_t dim;
  int64_t flushes;  // fusion_stats().flushes when it was made
};

std::mutex g_mutex;
std::shared_ptr<const std::function<at::Tensor(const at::Tensor&, int64_t)>> g_bound;
std::unordered_map<const c10::TensorImpl*, Grown> g_grown;  // cat results, by their impl
size_t g_prune_at = 256;

// The note on `t`, if `t` is a live cat result.
const Grown* grown_of(const at::Tensor& t) {
  auto it = g_grown.find(t.unsafeGetTensorImpl());
  if (it == g_grown.end()) return nullptr;
  if (it->second.impl.expired()) {
    g_grown.erase(it);
    return nullptr;
  }
  return &it->second;
}

void note(const at::Tensor& t, int64_t dim, int64_t flushes) {
  if (g_grown.size() >= g_prune_at) {  // results die with their step: drop those
    for (auto it = g_grown.begin(); it != g_grown.end();) it = it->second.impl.expired() ? g_grown.erase(it) : ++it;
    g_prune_at = std::max<size_t>(256, 2 * g_grown.size());
  }
  g_grown.insert_or_assign(t.unsafeGetTensorImpl(),
                           Grown{c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()), dim, flushes});
}

// aten::cat(Tensor[] tensors, int dim=0) -> Tensor
void cat_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::shared_ptr<const std::function<at::Tensor(const at::Tensor&, int64_t)>> bound;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    bound = g_bound;
  }
  if (!bound) {
    exec::run_lowered_op(op, stack);
    return;
  }
  const int64_t dim = (*stack)[stack->size() - 1].toInt();
  at::Tensor first;  // the first non-empty piece (torch.cat skips empty ones)
  for (const auto& t : (*stack)[stack->size() - 2].toTensorList()) {
    at::Tensor piece = t;
    if (piece.numel() > 0) {
      first = piece;
      break;
    }
  }
  exec::run_lowered_op(op, stack);
  at::Tensor out = stack->back().toTensor();
  if (out.dim() == 0 || at::GradMode::is_enabled() || runtime::eager_mode() != runtime::EagerMode::kFused ||
      runtime::capture_active())
    return;  // Strict Eager has no trace to keep stable; a graph's cats are its own
  const int64_t d = at::maybe_wrap_dim(dim, out.dim());
  const int64_t flushes = runtime::fusion_stats().flushes;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const Grown* g = first.defined() ? grown_of(first) : nullptr;
    if (g == nullptr || g->dim != d || g->flushes == flushes) {
      // The next cat of this result along d makes it bounded if a trace
      // ran in between (the next step of a loop; not a second cat in the
      // same step, or in a graph).
      note(out, d, flushes);
      return;
    }
  }
  stack->back() = (*bound)(out, d);  // Python: the lock is not held (it may run ops)
}

}  // namespace

void set_cat_bucketing(std::function<at::Tensor(const at::Tensor&, int64_t)> bound) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_bound = bound ? std::make_shared<const std::function<at::Tensor(const at::Tensor&, int64_t)>>(std::move(bound))
                  : nullptr;
  g_grown.clear();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", torch::CppFunction::makeFromBoxedFunction<&cat_boxed>());
}

}  // namespace torch_tpu::aten
