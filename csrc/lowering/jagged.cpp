// Dense <-> jagged conversions of one ragged dimension (the nested-tensor
// helpers): _jagged_to_padded_dense_forward and
// _padded_dense_to_jagged_forward. Rows of the jagged `values` [total_L, ...]
// belong to batch item b when offsets[b] <= row < offsets[b + 1]; the dense
// form is [B, max_length, ...]. Both are gathers with fixed output sizes.
#include <c10/util/Exception.h>

#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

// One offsets tensor, as int64 [B + 1].
Value offsets_of(LowerCtx& ctx) {
  auto list = ctx.arg("offsets").toTensorVector();
  TORCH_CHECK(list.size() == 1, ctx.op_name(), ": only one jagged dimension is supported, got ", list.size(),
              " offsets tensors");
  TORCH_CHECK(list[0].dim() == 1 && list[0].numel() >= 1, ctx.op_name(), ": offsets must be 1-D and non-empty, got shape ",
              list[0].sizes());
  TORCH_CHECK(!at::isFloatingType(list[0].scalar_type()) && list[0].scalar_type() != at::kBool, ctx.op_name(),
              ": offsets must be integers, got ", list[0].scalar_type());
  return hlo::convert(ctx.tensor_list("offsets")[0], ElementType::kI64);
}

// x [n, rest] rows gathered at int64 `rows` [m] (in range).
Value take_rows(Value x, Value rows) {
  int64_t n = x.dim(0), rest = x.dim(1), m = rows.dim(0);
  hlo::GatherDims gd;
  gd.offset_dims = {1};
  gd.collapsed_slice_dims = {0};
  gd.start_index_map = {0};
  gd.index_vector_dim = 1;
  (void)n;
  return hlo::gather(x, hlo::reshape(rows, {m, 1}), gd, {1, rest}, {m, rest});
}

}  // namespace

// _jagged_to_padded_dense_forward(values, offsets, max_lengths, padding_value):
// [B, max_length, ...]; items longer than max_length are cut.
TPU_LOWERING(_jagged_to_padded_dense_forward) {
  const at::Tensor& values = ctx.tensor_arg("values");
  TORCH_CHECK(values.dim() >= 1, ctx.op_name(), ": values must have at least one dimension");
  auto max_lengths = ctx.ints_arg("max_lengths");
  TORCH_CHECK(max_lengths.size() == 1, ctx.op_name(), ": expected one max length, got ", max_lengths.size());
  Value off = offsets_of(ctx);
  Builder& b = ctx.b();
  auto I = ElementType::kI64;
  int64_t nb = off.dim(0) - 1, m = max_lengths[0], total = values.size(0);
  int64_t rest = 1;
  for (int64_t d = 1; d < values.dim(); ++d) rest *= values.size(d);
  Value x = hlo::reshape(ctx.tensor("values"), {total, rest});
  Value start = hlo::slice(off, {0}, {nb}), end = hlo::slice(off, {1}, {nb + 1});
  Dims bm = {nb, m};
  Value row = hlo::add(hlo::broadcast_in_dim(start, bm, {0}), hlo::iota(b, I, bm, 1));
  Value ok = hlo::compare(row, hlo::broadcast_in_dim(end, bm, {0}), "LT");
  Value flat_rows = hlo::reshape(hlo::clamp(hlo::constant_int(b, I, 0), row, hlo::constant_int(b, I, total - 1)), {nb * m});
  Dims out = {nb, m};
  for (int64_t d = 1; d < values.dim(); ++d) out.push_back(values.size(d));
  if (total == 0 || nb * m == 0) {
    Value pad = hlo::convert(ctx.operand("padding_value", at::kDouble), x.element());
    return {hlo::broadcast_in_dim(pad, out, {})};
  }
  Value g = hlo::reshape(take_rows(x, flat_rows), {nb, m, rest});
  Value pad = hlo::broadcast_in_dim(hlo::convert(ctx.operand("padding_value", at::kDouble), x.element()), {nb, m, rest}, {});
  Value r = hlo::select(hlo::broadcast_in_dim(ok, {nb, m, rest}, {0, 1}), g, pad);
  return {hlo::reshape(r, out)};
}

// _padded_dense_to_jagged_forward(dense, offsets, total_L): [total_L, ...].
// total_L must be given: without it the size is offsets[-1], a device value.
// Rows outside every item (or beyond an item's padded length) read 0.
TPU_LOWERING(_padded_dense_to_jagged_forward) {
  const at::Tensor& dense = ctx.tensor_arg("dense");
  TORCH_CHECK(dense.dim() >= 2, ctx.op_name(), ": dense must be [B, max_length, ...], got shape ", dense.sizes());
  TORCH_CHECK(!ctx.is_none("total_L"), ctx.op_name(),
              ": on tpu total_L must be given (the output size would otherwise be read from the device)");
  int64_t total = ctx.int_arg("total_L");
  Value off = offsets_of(ctx);
  Builder& b = ctx.b();
  auto I = ElementType::kI64;
  int64_t nb = dense.size(0), m = dense.size(1);
  TORCH_CHECK(off.dim(0) == nb + 1, ctx.op_name(), ": offsets of length ", off.dim(0), " do not match ", nb,
              " batch items");
  int64_t rest = 1;
  for (int64_t d = 2; d < dense.dim(); ++d) rest *= dense.size(d);
  Dims out = {total};
  for (int64_t d = 2; d < dense.dim(); ++d) out.push_back(dense.size(d));
  Value x = hlo::reshape(ctx.tensor("dense"), {nb * m, rest});
  if (total == 0 || nb * m == 0) return {hlo::full(b, x.element(), out, 0)};
  // Item of each row: the number of item starts at or before it, minus one.
  Dims tb = {total, nb};
  Value row = hlo::iota(b, I, tb, 0);
  Value start = hlo::broadcast_in_dim(hlo::slice(off, {0}, {nb}), tb, {1});
  Value end = hlo::broadcast_in_dim(hlo::slice(off, {1}, {nb + 1}), tb, {1});
  Value in_item = hlo::binary("and", hlo::compare(row, start, "GE"), hlo::compare(row, end, "LT"));
  Value zero = hlo::full(b, I, tb, 0);
  Value item = hlo::reduce(hlo::select(in_item, hlo::iota(b, I, tb, 1), zero), {1}, hlo::ReduceKind::kSum);
  Value pos = hlo::reduce(hlo::select(in_item, hlo::sub(row, start), zero), {1}, hlo::ReduceKind::kSum);
  Value found = hlo::reduce(in_item, {1}, hlo::ReduceKind::kOr);
  found = hlo::binary("and", found, hlo::compare(pos, hlo::full(b, I, {total}, static_cast<double>(m)), "LT"));
  Value src = hlo::add(hlo::mul(item, hlo::full(b, I, {total}, static_cast<double>(m))), pos);
  src = hlo::clamp(hlo::constant_int(b, I, 0), src, hlo::constant_int(b, I, nb * m - 1));
  Value g = take_rows(x, src);
  Value r = hlo::select(hlo::broadcast_in_dim(found, {total, rest}, {0}), g, hlo::zeros_like(g));
  return {hlo::reshape(r, out)};
}

}  // namespace torch_tpu::lowering
