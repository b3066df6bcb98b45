// Advanced indexing: x[idx], x[:, idx0, idx1].
#include <ATen/ExpandUtils.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

// The pieces shared by gathering (index) and scattering (index_put) with a
// list of optional index tensors.
struct AdvancedIndex {
  Value indices;          // broadcast index shape + [number of indexed dims], i64
  Dims indexed;           // indexed dims of self
  Dims window_dims;       // positions of self's other dims in the result
  Dims result_dims;       // shape of self[indices]
  int64_t index_vector_dim = 0;
};

AdvancedIndex advanced_index(LowerCtx& ctx, Value self) {
  std::vector<Value> idx = ctx.tensor_list("indices");
  const auto& list = ctx.arg("indices").toListRef();
  AdvancedIndex ai;
  Dims bshape;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (!idx[d].valid()) continue;
    const auto& it = list[d].toTensor();
    TORCH_CHECK_NOT_IMPLEMENTED(it.scalar_type() != at::kBool && it.scalar_type() != at::kByte,
                                "torch_tpu: ", ctx.op_name(),
                                " with a boolean mask has a data-dependent shape; not supported yet");
    ai.indexed.push_back(static_cast<int64_t>(d));
    Dims s = idx[d].dims();
    // Index shapes broadcast right-aligned.
    if (s.size() > bshape.size()) bshape.insert(bshape.begin(), s.size() - bshape.size(), 1);
    for (size_t i = 0; i < s.size(); ++i) {
      auto& b = bshape[bshape.size() - s.size() + i];
      b = b == 1 ? s[i] : b;
    }
  }
  TORCH_CHECK(!ai.indexed.empty(), "torch_tpu: ", ctx.op_name(), " needs at least one index tensor");
  std::vector<Value> cols;
  Dims col_shape = bshape;
  col_shape.push_back(1);
  for (auto d : ai.indexed) {
    // Negative indices count from the end; out-of-range ones raise at the
    // next sync (index_check.h).
    Value i = checked_index(ctx, idx[d], d, self.dim(d), CheckKind::kIndexBounds, Negative::kWrap);
    cols.push_back(hlo::reshape(hlo::broadcast_to(i, bshape), col_shape));
  }
  int64_t nb = static_cast<int64_t>(bshape.size());
  ai.indices = hlo::concatenate(cols, nb);
  ai.index_vector_dim = nb;
  // NumPy's rule, which PyTorch follows: the broadcast index dims replace
  // the indexed dims when those are adjacent, else they go first.
  bool adjacent = ai.indexed.back() - ai.indexed.front() + 1 == static_cast<int64_t>(ai.indexed.size());
  int64_t insert_at = adjacent ? ai.indexed.front() : 0;
  auto is_indexed = [&](int64_t d) { return std::find(ai.indexed.begin(), ai.indexed.end(), d) != ai.indexed.end(); };
  for (int64_t d = 0, pos = 0; d < self.rank(); ++d) {
    if (is_indexed(d)) continue;
    if (pos == insert_at) pos += nb;
    ai.window_dims.push_back(pos++);
    ai.result_dims.push_back(self.dim(d));
  }
  ai.result_dims.insert(ai.result_dims.begin() + insert_at, bshape.begin(), bshape.end());
  return ai;
}

// Gathering or scattering along an indexed dim of size 0: XLA refuses the
// size-1 slice a gather takes there. With no index, self[indices] is empty
// (and an index_put writes nothing); any index is out of range, which the
// shapes alone tell, so it raises as on CPU.
bool indexes_empty_dim(LowerCtx& ctx, Value self, const AdvancedIndex& ai) {
  int64_t empty_dim = -1;
  for (auto d : ai.indexed)
    if (self.dim(d) == 0) empty_dim = d;
  if (empty_dim < 0) return false;
  int64_t n = 1;
  for (auto s : ai.result_dims) n *= s;
  TORCH_CHECK_INDEX(n == 0, ctx.op_name(), ": index 0 is out of bounds for dimension ", empty_dim, " with size 0");
  return true;
}

Dims slice_sizes(Value self, const Dims& indexed) {
  Dims s;
  for (int64_t d = 0; d < self.rank(); ++d)
    s.push_back(std::find(indexed.begin(), indexed.end(), d) != indexed.end() ? 1 : self.dim(d));
  return s;
}

}  // namespace

// index.Tensor(self, Tensor?[] indices)
TPU_LOWERING(index) {
  Value self = ctx.tensor("self");
  AdvancedIndex ai = advanced_index(ctx, self);
  if (indexes_empty_dim(ctx, self, ai)) return {hlo::full(ctx.b(), self.element(), ai.result_dims, 0)};
  hlo::GatherDims gd;
  gd.offset_dims = ai.window_dims;
  gd.collapsed_slice_dims = ai.indexed;
  gd.start_index_map = ai.indexed;
  gd.index_vector_dim = ai.index_vector_dim;
  return {hlo::gather(self, ai.indices, gd, slice_sizes(self, ai.indexed), ai.result_dims)};
}

// index_put(self, Tensor?[] indices, values, accumulate): self with the
// indexed elements replaced by (or, with accumulate, increased by) values.
TPU_LOWERING(index_put) {
  Value self = ctx.tensor("self");
  AdvancedIndex ai = advanced_index(ctx, self);
  // CPU and CUDA refuse to convert the values (else 1.5 written into an
  // integer tensor would silently become 1).
  TORCH_CHECK(ctx.dtype_of("values") == ctx.dtype_of("self"),
              "Index put requires the source and destination dtypes match, got ", ctx.dtype_of("self"),
              " for the destination and ", ctx.dtype_of("values"), " for the source.");
  if (indexes_empty_dim(ctx, self, ai)) return {self};
  Value values = ctx.operand("values", ctx.tensor_arg("self").scalar_type());
  // CPU's rule and message: values broadcast to the indexed result once
  // leading size-1 dims beyond its rank are dropped.
  const Dims given = values.dims(), want = ai.result_dims;
  size_t lead = 0;
  while (given.size() - lead > want.size() && given[lead] == 1) ++lead;
  const Dims kept(given.begin() + lead, given.end());
  TORCH_CHECK(at::is_expandable_to(kept, want), "shape mismatch: value tensor of shape ", c10::IntArrayRef(given),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(want));
  if (lead > 0) values = hlo::reshape(values, kept);
  values = hlo::broadcast_to(values, want);
  hlo::ScatterDims sd;
  sd.update_window_dims = ai.window_dims;
  sd.inserted_window_dims = ai.indexed;
  sd.scatter_dims_to_operand_dims = ai.indexed;
  sd.index_vector_dim = ai.index_vector_dim;
  bool accumulate = ctx.has("accumulate") && ctx.bool_arg("accumulate");
  const char* combine = accumulate ? (self.element() == ElementType::kPred ? "or" : "add") : nullptr;
  return {hlo::scatter(self, ai.indices, values, sd, combine)};
}
TPU_LOWERING_ALIAS(_index_put_impl, index_put);

}  // namespace torch_tpu::lowering
