// Scattering along one dimension and its relatives: scatter (+ reduce=),
// scatter_add, scatter_reduce, index_add, index_copy, index_fill,
// index_reduce, take, put, masked_scatter(_backward), unfold_backward.
//
// Indices are checked on the device (index_check.h): an out-of-range one
// raises at the next synchronisation, as CPU raises at the op (the
// program itself reads a clamped element or drops the update, StableHLO's
// semantics).
#include <ATen/MemoryOverlap.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <functional>

#include "lowering/compute_util.h"
#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::ScatterDims;

// Like CPU, refuse to write through a tensor whose elements share memory
// (an expanded out= or self): the result would depend on write order.
void check_writes(LowerCtx& ctx) {
  for (const auto& a : ctx.schema().arguments()) {
    if (!a.alias_info() || !a.alias_info()->isWrite()) continue;
    const auto& v = ctx.arg(a.name());
    if (v.isTensor() && v.toTensor().defined()) at::assert_no_internal_overlap(v.toTensor());
  }
}

// `v` (rank 0) in every element of `dims`.
Value splat(Value v, const Dims& dims) { return hlo::broadcast_in_dim(v, dims, {}); }

// Integer division rounding toward -inf for a positive divisor.
Value floor_div_pos(Value a, Value d) {
  Value q = hlo::div(a, d);
  Value r = hlo::binary("remainder", a, d);
  Value neg = hlo::compare(r, hlo::zeros_like(r), "LT");
  return hlo::select(neg, hlo::sub(q, hlo::full_like(q, 1)), q);
}

// Inclusive prefix sum of a 1-D value (log-step scan: pads and adds).
Value cumsum_1d(Value x) {
  int64_t n = x.dim(0);
  Value zero = hlo::constant(x.builder(), x.element(), 0);
  for (int64_t s = 1; s < n; s *= 2) x = hlo::add(x, hlo::pad(hlo::slice(x, {0}, {n - s}), zero, {s}, {0}));
  return x;
}

// A scatter into a base of self's shape with fixed indices and dimension
// numbers: fn(base, updates, combine).
using ScatterFn = std::function<Value(Value, Value, const char*)>;

// Scatter along `dim`: element p of the updates (shape of `index`) lands at p
// with coordinate `dim` replaced by index[p].
ScatterFn along_dim(LowerCtx& ctx, Value index, int64_t dim, int64_t self_size) {
  Builder& b = index.builder();
  int64_t rank = index.rank();
  Dims shape = index.dims();
  Dims col = shape;
  col.push_back(1);
  std::vector<Value> coords;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = d == dim ? checked_index(ctx, index, dim, self_size, CheckKind::kIndexBounds, Negative::kReject)
                       : hlo::iota(b, ElementType::kI64, shape, d);
    coords.push_back(hlo::reshape(c, col));
  }
  ScatterDims sd;
  for (int64_t d = 0; d < rank; ++d) {
    sd.inserted_window_dims.push_back(d);
    sd.scatter_dims_to_operand_dims.push_back(d);
  }
  sd.index_vector_dim = rank;
  Value idx = hlo::concatenate(coords, rank);
  return [idx, sd](Value base, Value upd, const char* combine) { return hlo::scatter(base, idx, upd, sd, combine); };
}

// Scatter of whole slices along `dim`: slice i of the updates (self's shape
// with `dim` of size k) lands at slice index[i] (index 1-D of size k).
ScatterFn index_dim(Value index_1d, int64_t rank, int64_t dim, Value checked) {
  int64_t k = index_1d.type().numel();
  Value idx = hlo::reshape(checked, {k, 1});
  ScatterDims sd;
  sd.update_window_dims = all_but(rank, {dim});
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return [idx, sd](Value base, Value upd, const char* combine) { return hlo::scatter(base, idx, upd, sd, combine); };
}

enum class Reduce { kSum, kProd, kMean, kMax, kMin };

Reduce parse_reduce(LowerCtx& ctx, const std::string& r) {
  if (r == "sum" || r == "add") return Reduce::kSum;
  if (r == "prod" || r == "multiply") return Reduce::kProd;
  if (r == "mean") return Reduce::kMean;
  if (r == "amax") return Reduce::kMax;
  if (r == "amin") return Reduce::kMin;
  TORCH_CHECK(false, ctx.op_name(), ": reduce argument must be either sum, prod, mean, amax or amin, got ", r);
}

const char* combine_op(Reduce r, ElementType e) {
  bool pred = e == ElementType::kPred;
  switch (r) {
    case Reduce::kSum:
    case Reduce::kMean: return pred ? "or" : "add";
    case Reduce::kProd: return pred ? "and" : "multiply";
    case Reduce::kMax: return pred ? "or" : "maximum";
    case Reduce::kMin: return pred ? "and" : "minimum";
  }
  return "add";
}

// self with `updates` reduced into the places `sc` sends them. Without
// include_self the places reached start from the reduction's identity.
// mean divides by the number of contributions (+1 with include_self),
// flooring for integers, like PyTorch.
Value reduce_into(Value self, Value updates, Reduce r, bool include_self, const ScatterFn& sc) {
  Builder& b = self.builder();
  ElementType e = self.element();
  Value base = self;
  if (!include_self) {
    Value touched = sc(hlo::full(b, ElementType::kPred, self.dims(), 0),
                       hlo::full(b, ElementType::kPred, updates.dims(), 1), nullptr);
    Value init;
    switch (r) {
      case Reduce::kSum:
      case Reduce::kMean: init = hlo::constant(b, e, 0); break;
      case Reduce::kProd: init = hlo::constant(b, e, 1); break;
      case Reduce::kMax: init = hlo::lowest(b, e); break;
      case Reduce::kMin: init = hlo::highest(b, e); break;
    }
    base = hlo::select(touched, splat(init, self.dims()), self);
  }
  Value out = sc(base, updates, combine_op(r, e));
  if (r == Reduce::kMean && e != ElementType::kPred) {
    Value count = sc(hlo::full(b, e, self.dims(), include_self ? 1 : 0), hlo::full(b, e, updates.dims(), 1), "add");
    Value zero = hlo::compare(count, hlo::zeros_like(count), "EQ");
    count = hlo::select(zero, hlo::full_like(count, 1), count);
    out = hlo::is_float(e) ? hlo::div(out, count) : floor_div_pos(out, count);
  }
  return out;
}

int64_t wrap_dim(LowerCtx& ctx, int64_t rank) {
  return c10::maybe_wrap_dim(ctx.int_arg("dim"), rank);  // rank 0 accepts 0 and -1
}

// The src / value argument as updates of `shape` in self's type.
Value updates_of(LowerCtx& ctx, const Dims& shape, at::ScalarType t) {
  for (const char* name : {"src", "source"}) {
    if (!ctx.is_tensor(name)) continue;
    Value src = ctx.operand(name, t);
    if (src.rank() == 0) return hlo::broadcast_to(src, shape);
    return src.dims() == shape ? src : hlo::slice(src, Dims(src.rank(), 0), shape);
  }
  return hlo::broadcast_to(ctx.operand("value", t), shape);
}

// scatter / scatter_add / scatter_reduce share this: self, dim, index and
// updates (src or value) taken from the context.
Value scatter_dim_rule(LowerCtx& ctx, std::optional<Reduce> r, bool include_self) {
  check_writes(ctx);
  Value self = ctx.tensor("self");
  at::ScalarType t = ctx.tensor_arg("self").scalar_type();
  Value index = ctx.tensor("index");
  if (index.type().numel() == 0) return self;
  bool scalar = self.rank() == 0;
  int64_t dim = wrap_dim(ctx, self.rank());
  if (scalar) {
    self = hlo::reshape(self, {1});
    index = hlo::reshape(index, {1});
  }
  Value updates = updates_of(ctx, index.dims(), t);
  ScatterFn sc = along_dim(ctx, index, dim, self.dim(dim));
  Value out = r ? reduce_into(self, updates, *r, include_self, sc) : sc(self, updates, nullptr);
  return scalar ? hlo::reshape(out, {}) : out;
}

}  // namespace

// scatter(self, dim, index, src | value, reduce=None|"add"|"multiply")
TPU_LOWERING(scatter) {
  std::optional<Reduce> r;
  if (ctx.has("reduce") && !ctx.is_none("reduce")) {
    std::string s = ctx.str_arg("reduce");
    TORCH_CHECK(s == "add" || s == "multiply", ctx.op_name(),
                ": reduce argument must be either add or multiply, got ", s);
    r = parse_reduce(ctx, s);
  }
  return {scatter_dim_rule(ctx, r, true)};
}

TPU_LOWERING(scatter_add) { return {scatter_dim_rule(ctx, Reduce::kSum, true)}; }

// scatter_reduce.two(self, dim, index, src, reduce, include_self)
TPU_LOWERING(scatter_reduce) {
  Reduce r = parse_reduce(ctx, ctx.str_arg("reduce"));
  return {scatter_dim_rule(ctx, r, ctx.bool_arg("include_self"))};
}

namespace {

// index_add / index_copy / index_fill / index_reduce: whole slices of self
// along `dim` chosen by a 1-D (or 0-dim) index.
Value index_dim_rule(LowerCtx& ctx, std::optional<Reduce> r, bool include_self, bool scale_by_alpha = false) {
  check_writes(ctx);
  Value self = ctx.tensor("self");
  at::ScalarType t = ctx.tensor_arg("self").scalar_type();
  Value index = ctx.tensor("index");
  int64_t k = index.type().numel();
  if (k == 0) return self;
  bool scalar = self.rank() == 0;
  int64_t dim = wrap_dim(ctx, self.rank());
  if (scalar) self = hlo::reshape(self, {1});
  Dims shape = self.dims();
  shape[dim] = k;
  Value updates;
  if (ctx.is_tensor("source")) {
    updates = hlo::reshape(ctx.operand("source", t), shape);
  } else {
    updates = hlo::broadcast_to(ctx.operand("value", t), shape);
  }
  if (scale_by_alpha && ctx.has("alpha")) {
    Value alpha = hlo::broadcast_to(ctx.operand("alpha", t), shape);
    updates = t == at::kBool ? hlo::binary("and", updates, alpha) : hlo::mul(updates, alpha);
  }
  // CPU: index_add / index_reduce raise "index out of range in self",
  // index_copy and index_fill name the index; only index_fill wraps
  // negative ones.
  std::string op = ctx.schema().name();
  bool in_self = op.find("index_add") != std::string::npos || op.find("index_reduce") != std::string::npos;
  bool wraps = op.find("index_fill") != std::string::npos;
  Value flat = hlo::reshape(index, {k});
  Value checked = checked_index(ctx, flat, dim, self.dim(dim), in_self ? CheckKind::kIndexInSelf : CheckKind::kIndexBounds,
                                wraps ? Negative::kWrap : Negative::kReject);
  ScatterFn sc = index_dim(flat, self.rank(), dim, checked);
  Value out = r ? reduce_into(self, updates, *r, include_self, sc) : sc(self, updates, nullptr);
  return scalar ? hlo::reshape(out, {}) : out;
}

}  // namespace

// index_add(self, dim, index, source, alpha)
TPU_LOWERING(index_add) { return {index_dim_rule(ctx, Reduce::kSum, true, true)}; }

// index_copy(self, dim, index, source)
TPU_LOWERING(index_copy) { return {index_dim_rule(ctx, std::nullopt, true)}; }

// index_fill(self, dim, index, value: Scalar or 0-dim Tensor)
TPU_LOWERING(index_fill) { return {index_dim_rule(ctx, std::nullopt, true)}; }

// index_reduce(self, dim, index, source, reduce, include_self)
TPU_LOWERING(index_reduce) {
  Reduce r = parse_reduce(ctx, ctx.str_arg("reduce"));
  return {index_dim_rule(ctx, r, ctx.bool_arg("include_self"))};
}

// take(self, index): self flattened, read at index (any shape).
TPU_LOWERING(take) {
  check_writes(ctx);
  if (ctx.is_tensor("out")) {
    at::assert_no_overlap(ctx.tensor_arg("out"), ctx.tensor_arg("self"));
    at::assert_no_overlap(ctx.tensor_arg("out"), ctx.tensor_arg("index"));
  }
  Value self = ctx.tensor("self");
  Value index = ctx.tensor("index");
  int64_t n = self.type().numel();
  if (index.type().numel() == 0 || n == 0) return {hlo::full(ctx.b(), self.element(), index.dims(), 0)};
  return {hlo::gather_1d(hlo::reshape(self, {n}),
                         checked_index(ctx, index, 0, n, CheckKind::kTakeBounds, Negative::kWrap))};
}

// put(self, index, source, accumulate): self flattened, written at index.
TPU_LOWERING(put) {
  check_writes(ctx);
  at::assert_no_overlap(ctx.tensor_arg("self"), ctx.tensor_arg("index"));
  at::assert_no_overlap(ctx.tensor_arg("self"), ctx.tensor_arg("source"));
  Value self = ctx.tensor("self");
  at::ScalarType t = ctx.tensor_arg("self").scalar_type();
  TORCH_CHECK(ctx.dtype_of("source") == t, "put_(): self and source expected to have the same dtype, but got self.dtype = ",
              t, " and source.dtype = ", ctx.dtype_of("source"));
  Value index = ctx.tensor("index");
  int64_t n = self.type().numel();
  int64_t k = index.type().numel();
  if (k == 0 || n == 0) return {self};
  Value src = hlo::reshape(ctx.operand("source", t), {k});
  Value idx = hlo::reshape(checked_index(ctx, index, 0, n, CheckKind::kTakeBounds, Negative::kWrap), {k});
  bool acc = ctx.bool_arg("accumulate");
  const char* combine = acc ? (t == at::kBool ? "or" : "add") : nullptr;
  return {hlo::reshape(hlo::scatter_1d(hlo::reshape(self, {n}), idx, src, combine), self.dims())};
}

// masked_scatter(self, mask, source): the elements of self where mask is
// true, in row-major order, take consecutive elements of source.
TPU_LOWERING(masked_scatter) {
  check_writes(ctx);
  TORCH_CHECK(ctx.dtype_of("mask") == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              ctx.dtype_of("mask"));
  at::ScalarType t = ctx.tensor_arg("self").scalar_type();
  Dims out = ctx.out_sizes(0) ? *ctx.out_sizes(0) : ctx.tensor_arg("self").sizes().vec();
  Value self = hlo::broadcast_to(ctx.tensor("self"), out);
  Value mask = hlo::broadcast_to(hlo::convert(ctx.tensor("mask"), ElementType::kPred), out);
  Value source = ctx.operand("source", t);
  int64_t n = self.type().numel();
  int64_t m = source.type().numel();
  if (n == 0) return {self};
  Builder& b = ctx.b();
  Value mflat = hlo::reshape(mask, {n});
  Value pos = hlo::sub(cumsum_1d(hlo::convert(mflat, ElementType::kI64)), hlo::full(b, ElementType::kI64, {n}, 1));
  // CPU's check (CUDA's device assert): the gather below would clamp, so a
  // short source repeated its last element
  check_data(ctx, hlo::binary("and", mflat, hlo::compare(pos, hlo::full(b, ElementType::kI64, {n}, static_cast<double>(m)), "GE")),
             "masked_scatter: Number of elements of source < number of ones in mask (" + std::to_string(m) +
                 " elements of source)");
  if (m == 0) return {self};
  pos = hlo::clamp(hlo::full(b, ElementType::kI64, {n}, 0), pos, hlo::full(b, ElementType::kI64, {n}, m - 1));
  Value picked = hlo::gather_1d(hlo::reshape(source, {m}), pos);
  return {hlo::reshape(hlo::select(mflat, picked, hlo::reshape(self, {n})), out)};
}

// masked_scatter_backward(grad_output, mask, sizes): the gradient of
// masked_scatter's source: grad_output where mask is true, packed in
// row-major order, zero-padded to `sizes`.
TPU_LOWERING(masked_scatter_backward) {
  Value g = ctx.tensor("grad_output");
  Dims gd = g.dims();
  Value mask = hlo::broadcast_to(hlo::convert(ctx.tensor("mask"), ElementType::kPred), gd);
  Dims sizes = ctx.ints_arg("sizes");
  int64_t m = 1;
  for (auto s : sizes) m *= s;
  Builder& b = ctx.b();
  int64_t n = g.type().numel();
  if (n == 0 || m == 0) return {hlo::full(b, g.element(), sizes, 0)};
  Value mflat = hlo::reshape(mask, {n});
  Value pos = hlo::sub(cumsum_1d(hlo::convert(mflat, ElementType::kI64)), hlo::full(b, ElementType::kI64, {n}, 1));
  // Unselected elements go out of range, where scatter drops them.
  pos = hlo::select(mflat, pos, hlo::full(b, ElementType::kI64, {n}, static_cast<double>(m)));
  Value out = hlo::scatter_1d(hlo::full(b, g.element(), {m}, 0), pos, hlo::reshape(g, {n}), nullptr);
  return {hlo::reshape(out, sizes)};
}

// unfold_backward(grad_in, input_sizes, dim, size, step): grad_in has
// input's shape with `dim` replaced by the window count, plus a trailing
// window dimension; overlapping windows add up.
TPU_LOWERING(unfold_backward) {
  Value g = ctx.tensor("grad_in");
  Dims in = ctx.ints_arg("input_sizes");
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t step = ctx.int_arg("step");
  Builder& b = ctx.b();
  Value zeros = hlo::full(b, g.element(), in, 0);
  if (g.type().numel() == 0) return {zeros};
  if (rank == 0) return {hlo::reshape(hlo::slice(g, {0}, {1}), {})};
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), rank);
  Dims gd = g.dims();  // rank + 1
  Dims col = gd;
  col.push_back(1);
  std::vector<Value> coords;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = hlo::iota(b, ElementType::kI64, gd, d);
    if (d == dim)
      c = hlo::add(hlo::mul(c, hlo::full(b, ElementType::kI64, gd, static_cast<double>(step))),
                   hlo::iota(b, ElementType::kI64, gd, rank));
    coords.push_back(hlo::reshape(c, col));
  }
  ScatterDims sd;
  for (int64_t d = 0; d < rank; ++d) {
    sd.inserted_window_dims.push_back(d);
    sd.scatter_dims_to_operand_dims.push_back(d);
  }
  sd.index_vector_dim = rank + 1;
  bool pred = g.element() == ElementType::kPred;
  return {hlo::scatter(zeros, hlo::concatenate(coords, rank + 1), g, sd, pred ? "or" : "add")};
}

}  // namespace torch_tpu::lowering
