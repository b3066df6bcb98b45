// Rules behind the data-dependent ops (nonzero, masked_select, unique, ...):
// once csrc/aten/data_dependent.cpp has read the result size from the
// device, these compute the result with that size fixed, so each size
// compiles once.
//   nonzero_static       ATen's own fixed-size nonzero
//   _tpu_unique_count    number of distinct (or runs of equal) elements/rows
//   _tpu_unique          the unique values, inverse indices and counts
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

Value i64_iota(Builder& b, int64_t n) { return hlo::iota(b, ElementType::kI64, {n}, 0); }

// Inclusive prefix sum along dim 0 of a 1-D value (log-step: shift and add).
Value prefix_sum(Value x) {
  int64_t n = x.dims()[0];
  for (int64_t shift = 1; shift < n; shift *= 2) {
    Value shifted = hlo::pad(hlo::slice(x, {0}, {n - shift}), hlo::constant(x.builder(), x.element(), 0),
                             {shift}, {0});
    x = hlo::add(x, shifted);
  }
  return x;
}

// `self` as rows: [N, M] where N runs along `dim` (or over all elements, M=1).
Value as_rows(Value x, std::optional<int64_t> dim) {
  auto dims = x.dims();
  int64_t numel = 1;
  for (auto d : dims) numel *= d;
  if (!dim) return hlo::reshape(x, {numel, 1});
  Dims perm{*dim};
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i)
    if (i != *dim) perm.push_back(i);
  int64_t n = dims[*dim];
  return hlo::reshape(hlo::transpose(x, perm), {n, n == 0 ? 0 : numel / n});
}

// Row `perm[i]` of rows, for each i.
Value take_rows(Value rows, Value perm) {
  hlo::GatherDims gd;
  gd.offset_dims = {1};
  gd.collapsed_slice_dims = {0};
  gd.start_index_map = {0};
  gd.index_vector_dim = 1;
  int64_t n = perm.dims()[0], m = rows.dims()[1];
  return hlo::gather(rows, hlo::reshape(perm, {n, 1}), gd, {1, m}, {n, m});
}

// Column j of rows as a 1-D value.
Value column(Value rows, int64_t j) {
  int64_t n = rows.dims()[0];
  return hlo::reshape(hlo::slice(rows, {0, j}, {n, j + 1}), {n});
}

struct Grouped {
  Value sorted;    // [N, M] rows in group order
  Value perm;      // [N] i64: sorted row i is input row perm[i]
  Value boundary;  // [N] i64: 1 where a new group starts
};

// Orders the rows (lexicographically, stable) unless `consecutive`, and marks
// where each group of equal rows starts.
Grouped group_rows(Value rows, bool consecutive) {
  Builder& b = rows.builder();
  int64_t n = rows.dims()[0], m = rows.dims()[1];
  if (hlo::is_float(rows.element())) {
    // -0.0 and 0.0 are one value for unique; x + 0 turns -0 into +0.
    rows = hlo::add(rows, hlo::full_like(rows, 0));
  }
  Value perm = i64_iota(b, n);
  if (!consecutive) {
    // Least significant column first; stable sorts make the order lexicographic.
    for (int64_t j = m - 1; j >= 0; --j) {
      Value key = hlo::gather_1d(column(rows, j), perm);
      perm = hlo::sort({key, perm}, 0, false, true)[1];
    }
  }
  Value sorted = consecutive ? rows : take_rows(rows, perm);
  Value boundary;
  if (n == 0) {
    boundary = hlo::full(b, ElementType::kI64, {0}, 0);
  } else {
    Value prev = hlo::slice(sorted, {0, 0}, {n - 1, m});
    Value next = hlo::slice(sorted, {1, 0}, {n, m});
    Value differs = hlo::reduce(hlo::compare(prev, next, "NE"), {1}, hlo::ReduceKind::kOr);
    boundary = hlo::concatenate({hlo::full(b, ElementType::kI64, {1}, 1), hlo::convert(differs, ElementType::kI64)}, 0);
  }
  return {sorted, perm, boundary};
}

std::optional<int64_t> dim_arg(LowerCtx& ctx) {
  if (ctx.is_none("dim")) return std::nullopt;
  return c10::maybe_wrap_dim(ctx.int_arg("dim"), ctx.tensor_arg("self").dim());
}

}  // namespace

TPU_LOWERING(nonzero_static) {
  Builder& b = ctx.b();
  const at::Tensor& self = ctx.tensor_arg("self");
  int64_t size = ctx.int_arg("size"), fill = ctx.int_arg("fill_value");
  int64_t numel = self.numel(), ndim = self.dim();
  Value x = hlo::reshape(ctx.tensor("self"), {numel});
  Value nz = x.element() == ElementType::kPred ? x : hlo::compare(x, hlo::zeros_like(x), "NE");
  // Stable sort on "is zero" brings the nonzero positions, in order, first.
  Value key = hlo::convert(hlo::unary("not", nz), ElementType::kI32);
  Value flat = hlo::sort({key, i64_iota(b, numel)}, 0, false, true)[1];
  Value count = hlo::reduce(hlo::convert(nz, ElementType::kI64), {0}, hlo::ReduceKind::kSum);
  if (size <= numel) {
    flat = hlo::slice(flat, {0}, {size});
  } else {
    flat = hlo::pad(flat, hlo::constant_int(b, ElementType::kI64, 0), {0}, {size - numel});
  }
  Value valid = hlo::compare(i64_iota(b, size), hlo::broadcast_to(count, {size}), "LT");
  std::vector<Value> coords;
  int64_t stride = 1;
  std::vector<int64_t> strides(ndim);
  for (int64_t d = ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= self.size(d);
  }
  for (int64_t d = 0; d < ndim; ++d) {
    // max(.., 1): with an empty dim nothing is valid, and XLA must not fold a
    // division by zero.
    Value c = hlo::div(flat, hlo::full(b, ElementType::kI64, {size}, std::max<int64_t>(strides[d], 1)));
    c = hlo::binary("remainder", c, hlo::full(b, ElementType::kI64, {size}, std::max<int64_t>(self.size(d), 1)));
    c = hlo::select(valid, c, hlo::full(b, ElementType::kI64, {size}, fill));
    coords.push_back(hlo::reshape(c, {size, 1}));
  }
  if (coords.empty()) return {hlo::full(b, ElementType::kI64, {size, 0}, 0)};
  return {hlo::concatenate(coords, 1)};
}

TPU_LOWERING(_tpu_unique_count) {
  Value rows = as_rows(ctx.tensor("self"), dim_arg(ctx));
  Grouped g = group_rows(rows, ctx.bool_arg("consecutive"));
  return {hlo::reduce(g.boundary, {0}, hlo::ReduceKind::kSum)};
}

TPU_LOWERING(_tpu_unique) {
  Builder& b = ctx.b();
  auto dim = dim_arg(ctx);
  Value self = ctx.tensor("self");
  Value rows = as_rows(self, dim);
  int64_t n = rows.dims()[0], m = rows.dims()[1];
  int64_t k = ctx.int_arg("num");
  Grouped g = group_rows(rows, ctx.bool_arg("consecutive"));
  Value group = hlo::sub(prefix_sum(g.boundary), hlo::full(b, ElementType::kI64, {n}, 1));

  // Unique rows: every row of a group is equal, so any writer wins.
  hlo::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value uniq = hlo::scatter(hlo::full(b, rows.element(), {k, m}, 0), hlo::reshape(group, {n, 1}),
                            take_rows(as_rows(self, dim), g.perm), sd);
  // Back to the input's layout: [K] or the input with `dim` of size K.
  auto in_dims = self.dims();
  Value values;
  if (!dim) {
    values = hlo::reshape(uniq, {k});
  } else {
    Dims moved{k};
    Dims back(in_dims.size());
    for (int64_t i = 0; i < static_cast<int64_t>(in_dims.size()); ++i)
      if (i != *dim) moved.push_back(in_dims[i]);
    values = hlo::reshape(uniq, moved);
    // moved = (dim, others...) -> original order.
    for (int64_t i = 0, j = 1; i < static_cast<int64_t>(in_dims.size()); ++i) back[i] = (i == *dim) ? 0 : j++;
    values = hlo::transpose(values, back);
  }
  Value inverse = hlo::scatter_1d(hlo::full(b, ElementType::kI64, {n}, 0), g.perm, group);
  Value counts = hlo::scatter_1d(hlo::full(b, ElementType::kI64, {k}, 0), group,
                                 hlo::full(b, ElementType::kI64, {n}, 1), "add");
  return {values, inverse, counts};
}

}  // namespace torch_tpu::lowering
