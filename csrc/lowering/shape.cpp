// Shape and indexing ops: cat, index_select, gather, flip, roll, tril, triu.
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include "lowering/compute_util.h"
#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

}  // namespace

TPU_LOWERING(cat) {
  at::ScalarType t = *ctx.out_dtype(0);
  Dims out_dims = *ctx.out_sizes(0);
  ElementType e = element_type(t);
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), static_cast<int64_t>(out_dims.size()));
  std::vector<Value> parts;
  const auto& list = ctx.arg("tensors").toListRef();
  std::vector<Value> vals = ctx.tensor_list("tensors");
  for (size_t i = 0; i < list.size(); ++i) {
    // Empty inputs add nothing (and legacy [0]-shaped ones may not even
    // match the rank): skip them like PyTorch.
    if (list[i].toTensor().numel() == 0) continue;
    parts.push_back(hlo::convert(vals[i], e));
  }
  if (parts.empty()) return {hlo::full(ctx.b(), e, out_dims, 0)};
  return {hlo::concatenate(parts, dim)};
}

TPU_LOWERING(index_select) {
  Value x = ctx.tensor("self");
  Value idx = ctx.tensor("index");
  int64_t rank = x.rank();
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), rank);
  if (rank == 0) x = hlo::reshape(x, {1});
  int64_t k = idx.type().numel();
  // embedding is index_select too: CPU's IndexError for both.
  idx = hlo::reshape(checked_index(ctx, idx, dim, x.dim(dim), CheckKind::kIndexInSelf, Negative::kReject), {k, 1});
  Dims slice_sizes = x.dims();
  slice_sizes[dim] = 1;
  Dims result = x.dims();
  result[dim] = k;
  hlo::GatherDims gd;
  gd.offset_dims = all_but(x.rank(), {dim});
  gd.collapsed_slice_dims = {dim};
  gd.start_index_map = {dim};
  gd.index_vector_dim = 1;
  return {hlo::gather(x, idx, gd, slice_sizes, result)};
}

TPU_LOWERING(gather) {
  Value x = ctx.tensor("self");
  Value idx = ctx.tensor("index");
  int64_t rank = x.rank();
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), rank);
  if (rank == 0) {
    x = hlo::reshape(x, {1});
    idx = hlo::reshape(idx, {1});
    rank = 1;
  }
  if (idx.type().numel() == 0) return {hlo::full(ctx.b(), x.element(), idx.dims(), 0)};
  idx = checked_index(ctx, idx, dim, x.dim(dim), CheckKind::kIndexBounds, Negative::kReject);
  Dims col = idx.dims();
  col.push_back(1);
  std::vector<Value> coords;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = d == dim ? idx : hlo::iota(ctx.b(), ElementType::kI64, idx.dims(), d);
    coords.push_back(hlo::reshape(c, col));
  }
  Value full_idx = hlo::concatenate(coords, rank);
  hlo::GatherDims gd;
  for (int64_t d = 0; d < rank; ++d) {
    gd.collapsed_slice_dims.push_back(d);
    gd.start_index_map.push_back(d);
  }
  gd.index_vector_dim = rank;
  return {hlo::gather(x, full_idx, gd, Dims(rank, 1), idx.dims())};
}

TPU_LOWERING(flip) {
  Value x = ctx.tensor("self");
  Dims dims;
  for (auto d : ctx.ints_arg("dims")) {
    int64_t w = c10::maybe_wrap_dim(d, x.rank());
    if (x.rank() == 0) continue;
    bool seen = false;
    for (auto o : dims) seen |= o == w;
    TORCH_CHECK(!seen, "dim ", w, " appears multiple times in the list of dims");
    dims.push_back(w);
  }
  return {hlo::reverse(x, dims)};
}

namespace {

Value roll_dim(Value x, int64_t shift, int64_t dim) {
  int64_t n = x.dim(dim);
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  Dims start(x.rank(), 0), limit = x.dims();
  start[dim] = n - s;
  Value tail = hlo::slice(x, start, limit);
  start[dim] = 0;
  limit[dim] = n - s;
  Value head = hlo::slice(x, start, limit);
  return hlo::concatenate({tail, head}, dim);
}

}  // namespace

TPU_LOWERING(roll) {
  Value x = ctx.tensor("self");
  auto shifts = ctx.ints_arg("shifts");
  auto dims = ctx.has("dims") ? ctx.ints_arg("dims") : std::vector<int64_t>{};
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
    Dims orig = x.dims();
    Value flat = hlo::reshape(x, {x.type().numel()});
    return {hlo::reshape(roll_dim(flat, shifts[0], 0), orig)};
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  bool scalar = x.rank() == 0;
  if (scalar) x = hlo::reshape(x, {1});
  for (size_t i = 0; i < dims.size(); ++i) x = roll_dim(x, shifts[i], c10::maybe_wrap_dim(dims[i], x.rank()));
  if (scalar) x = hlo::reshape(x, {});
  return {x};
}

namespace {

Value triangle(LowerCtx& ctx, bool lower) {
  Value x = ctx.tensor("self");
  int64_t r = x.rank();
  TORCH_CHECK(r >= 2, lower ? "tril" : "triu", ": input tensor must have at least 2 dimensions");
  int64_t diag = ctx.int_arg("diagonal");
  Builder& b = ctx.b();
  Value rows = hlo::iota(b, ElementType::kI64, x.dims(), r - 2);
  Value cols = hlo::iota(b, ElementType::kI64, x.dims(), r - 1);
  Value diff = hlo::sub(cols, rows);
  Value dv = hlo::full(b, ElementType::kI64, x.dims(), static_cast<double>(diag));
  Value keep = hlo::compare(diff, dv, lower ? "LE" : "GE");
  return hlo::select(keep, x, hlo::zeros_like(x));
}

}  // namespace

TPU_LOWERING(tril) { return {triangle(ctx, true)}; }
TPU_LOWERING(triu) { return {triangle(ctx, false)}; }

}  // namespace torch_tpu::lowering
