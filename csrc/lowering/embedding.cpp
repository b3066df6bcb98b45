// Embedding bags and embedding_renorm_: _embedding_bag (+ _forward_only),
// its dense backward and the per_sample_weights backward.
//
// (embedding itself is index_select; embedding_dense_backward lives in
// nn.cpp.) The forward checks its indices on the device (index_check.h);
// the backward gets the same indices and does not check again.
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

#include "lowering/compute_util.h"
#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

Value i64(Value v) { return hlo::convert(v, ElementType::kI64); }

// Inclusive prefix sum of a 1-D value (log-step scan).
Value cumsum_1d(Value x) {
  int64_t n = x.dim(0);
  Value zero = hlo::constant(x.builder(), x.element(), 0);
  for (int64_t s = 1; s < n; s *= 2) x = hlo::add(x, hlo::pad(hlo::slice(x, {0}, {n - s}), zero, {s}, {0}));
  return x;
}

// Bag of each of the n indices, PyTorch's make_offset2bag: the number of
// offsets <= i, minus one.
Value offset2bag(Value offsets, int64_t n) {
  Builder& b = offsets.builder();
  int64_t k = offsets.type().numel();
  Value starts = hlo::full(b, ElementType::kI64, {n + 1}, 0);
  if (k > 0)
    starts = hlo::scatter_1d(starts, i64(offsets), hlo::full(b, ElementType::kI64, {k}, 1), "add");
  Value cum = hlo::slice(cumsum_1d(starts), {0}, {n});
  return hlo::sub(cum, hlo::full(b, ElementType::kI64, {n}, 1));
}

// Rows of a 2-D `table` at the 1-D i64 `idx`: shape [n, D].
Value rows_at(Value table, Value idx) {
  int64_t n = idx.dim(0);
  hlo::GatherDims gd;
  gd.offset_dims = {1};
  gd.collapsed_slice_dims = {0};
  gd.start_index_map = {0};
  gd.index_vector_dim = 1;
  return hlo::gather(table, hlo::reshape(idx, {n, 1}), gd, {1, table.dim(1)}, {n, table.dim(1)});
}

// Adds (or combines) rows `upd` [n, D] into `table` at rows `idx` [n].
Value add_rows(Value table, Value idx, Value upd, const char* combine) {
  int64_t n = idx.dim(0);
  hlo::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  return hlo::scatter(table, hlo::reshape(idx, {n, 1}), upd, sd, combine);
}

Value bcast_rows(Value v_n, const Dims& nd) { return hlo::broadcast_in_dim(v_n, nd, {0}); }

// A 1-D value resized to `n` elements: cut, or zero-padded.
Value resize_1d(Value v, int64_t n) {
  int64_t have = v.dim(0);
  if (have == n) return v;
  if (have > n) return hlo::slice(v, {0}, {n});
  return hlo::pad(v, hlo::constant(v.builder(), v.element(), 0), {0}, {n - have});
}

// `v` fitted to the meta kernel's sizes of output i (which may be empty).
Value fit_output(LowerCtx& ctx, int i, Value v) {
  auto sizes = ctx.out_sizes(i);
  if (!sizes) return v;
  int64_t numel = 1;
  for (auto s : *sizes) numel *= s;
  if (numel == 0) return hlo::full(ctx.b(), v.element(), *sizes, 0);
  if (v.dims() == *sizes) return v;
  if (v.rank() == 1 && sizes->size() == 1) return resize_1d(v, (*sizes)[0]);
  return hlo::reshape(resize_1d(hlo::reshape(v, {v.type().numel()}), numel), *sizes);
}

}  // namespace

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
//   per_sample_weights, include_last_offset, padding_idx)
//   -> (output, offset2bag, bag_size, max_indices)
TPU_LOWERING(_embedding_bag) {
  const at::Tensor& it = ctx.tensor_arg("indices");
  TORCH_CHECK_NOT_IMPLEMENTED(it.dim() == 1, "torch_tpu: ", ctx.op_name(),
                              " with 2-D indices is not supported; flatten them and pass offsets");
  Value w = ctx.tensor("weight");
  ElementType we = w.element();
  int64_t D = w.dim(1);
  int64_t mode = ctx.int_arg("mode");
  int64_t padding_idx = ctx.int_arg("padding_idx");
  bool include_last = ctx.bool_arg("include_last_offset");
  Value idx = i64(ctx.tensor("indices"));
  Value offs = i64(ctx.tensor("offsets"));
  int64_t n = idx.dim(0);
  int64_t nb = offs.dim(0) - (include_last ? 1 : 0);
  Builder& b = ctx.b();
  if (offs.dim(0) > 0) {  // CPU's checks of the offsets
    int64_t k = offs.dim(0);
    Value first = hlo::slice(offs, {0}, {1}), last = hlo::slice(offs, {k - 1}, {k});
    check_data(ctx, hlo::compare(first, hlo::zeros_like(first), "NE"),
               "embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
               "position 0. However, got {}",
               first);
    check_data(ctx, hlo::compare(last, hlo::full_like(last, static_cast<double>(n)), "GT"),
               "embedding_bag: offsets[-1] can not be greater than input's length " + std::to_string(n) +
                   " but got offsets[-1] of {}",
               last);
  }
  if (nb <= 0 || n == 0) {
    Value zero_out = hlo::full(b, we, {std::max<int64_t>(nb, 0), D}, 0);
    Value z = hlo::full(b, ElementType::kI64, {std::max<int64_t>(nb, 0)}, 0);
    Value zi = hlo::full(b, ElementType::kI64, {std::max<int64_t>(nb, 0), D}, 0);
    return {zero_out, fit_output(ctx, 1, hlo::full(b, ElementType::kI64, {n}, 0)), fit_output(ctx, 2, z),
            fit_output(ctx, 3, mode == kMax ? zi : z)};
  }
  {  // CPU raises for an index outside the table (RuntimeError); rows_at would clamp it.
    Value bad = hlo::binary("or", hlo::compare(idx, hlo::full(b, ElementType::kI64, {n}, 0), "LT"),
                            hlo::compare(idx, hlo::full(b, ElementType::kI64, {n}, static_cast<double>(w.dim(0))), "GE"));
    add_check(ctx, bad, idx, CheckKind::kBagIndex, 0, w.dim(0), CheckError::kRuntime);
  }
  Value o2b = offset2bag(hlo::slice(offs, {0}, {nb}), n);
  Dims nd{n, D};
  Value valid = padding_idx >= 0
                    ? hlo::compare(idx, hlo::full(b, ElementType::kI64, {n}, static_cast<double>(padding_idx)), "NE")
                    : hlo::full(b, ElementType::kPred, {n}, 1);
  Value count = hlo::scatter_1d(hlo::full(b, ElementType::kI64, {nb}, 0), o2b, i64(valid), "add");
  Value vrows = bcast_rows(valid, nd);
  Value rows = rows_at(w, idx);
  Value out, max_idx;
  if (mode == kMax) {
    Value low = hlo::broadcast_in_dim(hlo::constant(b, we, -std::numeric_limits<double>::infinity()), nd, {});
    rows = hlo::select(vrows, rows, low);
    Value best = add_rows(hlo::full(b, we, {nb, D}, -std::numeric_limits<double>::infinity()), o2b, rows, "maximum");
    // The first index of each bag reaching the maximum (CPU keeps the first).
    Value hit = hlo::binary("and", vrows, hlo::compare(rows, rows_at(best, o2b), "EQ"));
    Value pos = hlo::select(hit, hlo::iota(b, ElementType::kI64, nd, 0), hlo::full(b, ElementType::kI64, nd, n));
    Value first = add_rows(hlo::full(b, ElementType::kI64, {nb, D}, n), o2b, pos, "minimum");
    Value none = hlo::compare(first, hlo::full(b, ElementType::kI64, {nb, D}, n), "EQ");
    Value at = hlo::gather_1d(idx, hlo::select(none, hlo::full(b, ElementType::kI64, {nb, D}, 0), first));
    max_idx = hlo::select(none, hlo::full(b, ElementType::kI64, {nb, D}, 0), at);
    Value empty = bcast_rows(hlo::compare(count, hlo::full(b, ElementType::kI64, {nb}, 0), "EQ"), {nb, D});
    out = hlo::select(empty, hlo::full(b, we, {nb, D}, 0), best);
  } else {
    ElementType ae = acc_type(we);
    Value r = hlo::convert(rows, ae);
    if (!ctx.is_none("per_sample_weights"))
      r = hlo::mul(r, bcast_rows(hlo::convert(ctx.tensor("per_sample_weights"), ae), nd));
    r = hlo::select(vrows, r, hlo::full(b, ae, nd, 0));
    out = hlo::convert(add_rows(hlo::full(b, ae, {nb, D}, 0), o2b, r, "add"), we);
    if (mode == kMean) {
      Value c = hlo::max(count, hlo::full(b, ElementType::kI64, {nb}, 1));
      out = hlo::div(out, bcast_rows(hlo::convert(c, we), {nb, D}));
    }
  }
  // CPU zeroes bag_size in sum mode; max_indices copies bag_size outside max
  // mode.
  Value bag_size = mode == kSum ? hlo::full(b, ElementType::kI64, {nb}, 0) : count;
  return {out, fit_output(ctx, 1, o2b), fit_output(ctx, 2, bag_size),
          fit_output(ctx, 3, mode == kMax ? max_idx : bag_size)};
}
TPU_LOWERING_ALIAS(_embedding_bag_forward_only, _embedding_bag);

namespace {

// Dense gradient of the weight of an embedding bag.
Value embedding_bag_dense_backward(LowerCtx& ctx, Value o2b) {
  Value grad = ctx.tensor("grad");
  ElementType ge = grad.element();
  int64_t D = grad.dim(1);
  int64_t nbg = grad.dim(0);
  int64_t num_weights = ctx.int_arg("num_weights");
  int64_t mode = ctx.int_arg("mode");
  int64_t padding_idx = ctx.int_arg("padding_idx");
  Builder& b = ctx.b();
  Value zeros = hlo::full(b, ge, {num_weights, D}, 0);
  Value idx = hlo::reshape(i64(ctx.tensor("indices")), {ctx.tensor_arg("indices").numel()});
  int64_t n = idx.dim(0);
  if (n == 0 || nbg == 0) return zeros;
  Value bag_size = i64(ctx.tensor("bag_size"));
  bag_size = resize_1d(hlo::reshape(bag_size, {bag_size.type().numel()}), nbg);
  if (mode == kMax) {
    Value mi = i64(ctx.tensor("maximum_indices"));
    Value nonempty = bcast_rows(hlo::compare(bag_size, hlo::full(b, ElementType::kI64, {nbg}, 0), "NE"), {nbg, D});
    Value upd = hlo::select(nonempty, grad, hlo::full(b, ge, {nbg, D}, 0));
    Dims col{nbg, D, 1};
    Value coords = hlo::concatenate({hlo::reshape(mi, col), hlo::reshape(hlo::iota(b, ElementType::kI64, {nbg, D}, 1), col)}, 2);
    hlo::ScatterDims sd;
    sd.inserted_window_dims = {0, 1};
    sd.scatter_dims_to_operand_dims = {0, 1};
    sd.index_vector_dim = 2;
    return hlo::scatter(zeros, coords, upd, sd, "add");
  }
  ElementType ce = ge == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
  Value scale = hlo::full(b, ce, {n}, 1);
  if (!ctx.is_none("per_sample_weights"))
    scale = hlo::convert(hlo::reshape(ctx.tensor("per_sample_weights"), {n}), ce);
  if (ctx.bool_arg("scale_grad_by_freq")) {
    // CPU walks the sorted indices by groups of equal values and divides
    // group g by counts[sorted[g]] (not counts[value]): matched here. g is
    // the number of distinct values below the element's own.
    Value counts = hlo::scatter_1d(hlo::full(b, ElementType::kI64, {num_weights}, 0), idx,
                                   hlo::full(b, ElementType::kI64, {n}, 1), "add");
    Value present = hlo::convert(hlo::compare(counts, hlo::full(b, ElementType::kI64, {num_weights}, 0), "GT"),
                                 ElementType::kI64);
    Value below = hlo::sub(cumsum_1d(present), present);
    Value sorted = hlo::sort({idx}, 0, false, false)[0];
    Value c = hlo::gather_1d(counts, hlo::gather_1d(sorted, hlo::gather_1d(below, idx)));
    scale = hlo::div(scale, hlo::convert(c, ce));
  }
  if (mode == kMean) {
    Value bs = hlo::convert(hlo::gather_1d(bag_size, o2b), ce);
    Value zero = hlo::compare(bs, hlo::full(b, ce, {n}, 0), "EQ");
    scale = hlo::div(scale, hlo::select(zero, hlo::full(b, ce, {n}, 1), bs));
  }
  Dims nd{n, D};
  Value upd = hlo::mul(rows_at(grad, o2b), bcast_rows(hlo::convert(scale, ge), nd));
  if (padding_idx >= 0) {
    Value keep = hlo::compare(idx, hlo::full(b, ElementType::kI64, {n}, static_cast<double>(padding_idx)), "NE");
    upd = hlo::select(bcast_rows(keep, nd), upd, hlo::full(b, ge, nd, 0));
  }
  return add_rows(zeros, idx, upd, "add");
}

// The offset2bag argument, or (when the forward left it empty) one rebuilt
// from the offsets.
Value o2b_arg(LowerCtx& ctx) {
  int64_t n = ctx.tensor_arg("indices").numel();
  if (ctx.is_tensor("offset2bag") && ctx.tensor_arg("offset2bag").numel() > 0)
    return hlo::reshape(i64(ctx.tensor("offset2bag")), {n});
  if (n == 0) return hlo::full(ctx.b(), ElementType::kI64, {0}, 0);
  Value offs = ctx.tensor("offsets");
  return offset2bag(hlo::reshape(offs, {offs.type().numel()}), n);
}

}  // namespace

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
//   maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
//   per_sample_weights, padding_idx)
// (sparse=True never gets here: aten/sparse_coo.cpp takes it first.)
TPU_LOWERING(_embedding_bag_backward) {
  return {embedding_bag_dense_backward(ctx, o2b_arg(ctx))};
}

// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size,
//   maximum_indices, num_weights, scale_grad_by_freq, mode,
//   per_sample_weights, padding_idx)
TPU_LOWERING(_embedding_bag_dense_backward) {
  int64_t n = ctx.tensor_arg("indices").numel();
  Value o2b = n == 0 ? hlo::full(ctx.b(), ElementType::kI64, {0}, 0) : hlo::reshape(i64(ctx.tensor("offset2bag")), {n});
  return {embedding_bag_dense_backward(ctx, o2b)};
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets,
//   offset2bag, mode, padding_idx): d output / d per_sample_weights[i] is
//   grad[bag(i)] . weight[indices[i]].
TPU_LOWERING(_embedding_bag_per_sample_weights_backward) {
  TORCH_CHECK(ctx.int_arg("mode") == kSum,
              "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  Value grad = ctx.tensor("grad");
  ElementType ge = grad.element();
  int64_t n = ctx.tensor_arg("indices").numel();
  Builder& b = ctx.b();
  if (n == 0) return {hlo::full(b, ge, {0}, 0)};
  Value idx = hlo::reshape(i64(ctx.tensor("indices")), {n});
  Value o2b = o2b_arg(ctx);
  ElementType ae = acc_type(ge);
  Value prod = hlo::mul(hlo::convert(rows_at(grad, o2b), ae), hlo::convert(rows_at(ctx.tensor("weight"), idx), ae));
  Value dot = hlo::reduce(prod, {1}, hlo::ReduceKind::kSum);
  int64_t padding_idx = ctx.int_arg("padding_idx");
  if (padding_idx >= 0) {
    Value keep = hlo::compare(idx, hlo::full(b, ElementType::kI64, {n}, static_cast<double>(padding_idx)), "NE");
    dot = hlo::select(keep, dot, hlo::full(b, ae, {n}, 0));
  }
  return {hlo::convert(dot, ge)};
}

// embedding_renorm_(self, indices, max_norm, norm_type): rows of self named
// by indices whose norm exceeds max_norm are scaled to max_norm / (norm + 1e-7).
TPU_LOWERING(embedding_renorm) {
  Value w = ctx.tensor("self");
  ElementType we = w.element();
  int64_t N = w.dim(0);
  Dims wd = w.dims();
  double max_norm = ctx.float_arg("max_norm");
  double p = ctx.float_arg("norm_type");
  Builder& b = ctx.b();
  int64_t k = ctx.tensor_arg("indices").numel();
  if (k == 0 || N == 0) return {w};
  Value idx = hlo::reshape(i64(ctx.tensor("indices")), {k});
  Value touched = hlo::scatter_1d(hlo::full(b, ElementType::kPred, {N}, 0), idx, hlo::full(b, ElementType::kPred, {k}, 1), nullptr);
  ElementType ce = acc_type(we);
  Value x = hlo::convert(w, ce);
  Value a = hlo::unary("abs", x);
  Dims rest;
  for (int64_t d = 1; d < w.rank(); ++d) rest.push_back(d);
  Value norm;
  if (p == 0) {
    norm = hlo::reduce(hlo::convert(hlo::compare(a, hlo::zeros_like(a), "NE"), ce), rest, hlo::ReduceKind::kSum);
  } else if (std::isinf(p)) {
    norm = hlo::reduce(a, rest, p > 0 ? hlo::ReduceKind::kMax : hlo::ReduceKind::kMin);
  } else if (p == 1) {
    norm = hlo::reduce(a, rest, hlo::ReduceKind::kSum);
  } else if (p == 2) {
    norm = hlo::unary("sqrt", hlo::reduce(hlo::mul(a, a), rest, hlo::ReduceKind::kSum));
  } else {
    Value s = hlo::reduce(hlo::binary("power", a, hlo::full_like(a, p)), rest, hlo::ReduceKind::kSum);
    norm = hlo::binary("power", s, hlo::full_like(s, 1.0 / p));
  }
  // The norm is a tensor of self's dtype on CPU: round it the same way.
  norm = hlo::convert(hlo::convert(norm, we), ce);
  Value big = hlo::binary("and", touched, hlo::compare(norm, hlo::full(b, ce, {N}, max_norm), "GT"));
  Value scale = hlo::div(hlo::full(b, ce, {N}, max_norm), hlo::add(norm, hlo::full(b, ce, {N}, 1e-7)));
  Value scaled = hlo::convert(hlo::mul(x, hlo::broadcast_in_dim(scale, wd, {0})), we);
  return {hlo::select(hlo::broadcast_in_dim(big, wd, {0}), scaled, w)};
}

}  // namespace torch_tpu::lowering
