#include "lowering/view.h"

#include <algorithm>
#include <numeric>

namespace torch_tpu::lowering {
namespace hl = torch_tpu::hlo;
using hlo::Dims;
using hlo::ElementType;

namespace {

int64_t numel_of(c10::IntArrayRef sizes) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

bool is_contiguous(const ViewLayout& v) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(v.sizes.size()) - 1; i >= 0; --i) {
    if (v.sizes[i] != 1 && v.strides[i] != expected) return false;
    expected *= v.sizes[i];
  }
  return true;
}

// storage offset of every element of the view, as an i64 tensor of `sizes`;
// it starts at `offset` where that is valid (a runtime operand), else at
// v.offset.
Value element_indices(hl::Builder& b, const ViewLayout& v, Value offset = Value()) {
  Dims dims(v.sizes.begin(), v.sizes.end());
  Value idx = offset.valid() ? hl::broadcast_to(offset, dims)
                             : hl::full(b, ElementType::kI64, dims, static_cast<double>(v.offset));
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (dims[d] == 1 || v.strides[d] == 0) continue;
    Value term = hl::mul(hl::iota(b, ElementType::kI64, dims, d), hl::full(b, ElementType::kI64, dims, v.strides[d]));
    idx = hl::add(idx, term);
  }
  return idx;
}

// The view's dims (size-1 dims left out) by decreasing stride, when its
// elements fill a contiguous span exactly once in some dim order (a
// transposed or channels-last tensor, or a permuted slice of one): a
// dense permutation of row-major order. Otherwise empty.
std::vector<int64_t> dense_order(const ViewLayout& v) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < static_cast<int64_t>(v.sizes.size()); ++d)
    if (v.sizes[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (v.strides[*it] != expected) return {};
    expected *= v.sizes[*it];
  }
  return order;
}

}  // namespace

bool covers_storage(const ViewLayout& v, int64_t storage_numel) {
  return v.offset == 0 && numel_of(v.sizes) == storage_numel && is_contiguous(v);
}

namespace {

// Elements [start, start + length) of the storage, zeros past its end. The
// start is v.offset, or the runtime operand `offset` where that is valid:
// then the view's own extent is cut (a valid view lies inside its storage,
// so dynamic_slice never clamps it) and padded to `length`.
Value span_of(Value storage, const ViewLayout& v, Value offset, int64_t length) {
  hl::Builder& b = storage.builder();
  int64_t storage_numel = storage.dim(0);
  if (offset.valid()) {
    int64_t extent = 1;
    for (size_t d = 0; d < v.sizes.size(); ++d) extent += (v.sizes[d] - 1) * std::abs(v.strides[d]);
    Value part = hl::dynamic_slice(storage, {offset}, {extent});
    if (extent >= length) return hl::slice(part, {0}, {length});
    return hl::pad(part, hl::constant(b, storage.element(), 0), {0}, {length - extent});
  }
  int64_t end = std::min(v.offset + length, storage_numel);
  Value flat = hl::slice(storage, {v.offset}, {end});
  if (end - v.offset < length)
    flat = hl::pad(flat, hl::constant(b, storage.element(), 0), {0}, {length - (end - v.offset)});
  return flat;
}

Value read_view_from(Value storage, const ViewLayout& v, Value offset) {
  hl::Builder& b = storage.builder();
  Dims sizes(v.sizes.begin(), v.sizes.end());
  int64_t n = numel_of(v.sizes);
  int64_t storage_numel = storage.dim(0);
  if (n == 0) return hl::full(b, storage.element(), sizes, 0);
  if (!offset.valid() && covers_storage(v, storage_numel)) return hl::reshape(storage, sizes);

  // Core dims: those that move through memory (size > 1, stride != 0).
  std::vector<int64_t> core;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d)
    if (sizes[d] != 1 && v.strides[d] != 0) core.push_back(d);
  std::vector<int64_t> order = core;  // core dims by decreasing stride
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });

  bool block = true;
  for (size_t i = 1; i < order.size(); ++i) {
    int64_t outer = v.strides[order[i - 1]], inner = v.strides[order[i]];
    block &= inner > 0 && outer % inner == 0 && sizes[order[i]] * inner <= outer;
  }
  if (!order.empty()) block &= v.strides[order.back()] > 0;

  Value dense;
  if (order.empty()) {
    dense = hl::reshape(span_of(storage, v, offset, 1), {});
  } else if (block) {
    // The view is a strided block of a row-major array: take the span,
    // shape it as [n0, s0/s1, ..., s_last] and cut each dim to its size.
    int64_t s0 = v.strides[order[0]];
    int64_t span = sizes[order[0]] * s0;
    Value flat = span_of(storage, v, offset, span);
    Dims shape{sizes[order[0]]};
    for (size_t i = 1; i < order.size(); ++i) shape.push_back(v.strides[order[i - 1]] / v.strides[order[i]]);
    shape.push_back(v.strides[order.back()]);
    Value blockv = hl::reshape(flat, shape);
    Dims start(shape.size(), 0), limit;
    for (size_t i = 0; i < order.size(); ++i) limit.push_back(sizes[order[i]]);
    limit.push_back(1);
    Dims core_sizes(limit.begin(), limit.end() - 1);
    Value cut = hl::reshape(hl::slice(blockv, start, limit), core_sizes);
    // `cut` is in stride order; bring it back to the view's dim order.
    Dims perm;
    for (auto d : core) perm.push_back(std::find(order.begin(), order.end(), d) - order.begin());
    dense = hl::transpose(cut, perm);
  } else {
    return hl::gather_1d(storage, element_indices(b, v, offset));
  }
  // Size-1 and stride-0 dims come back by broadcasting.
  return hl::broadcast_in_dim(dense, sizes, Dims(core.begin(), core.end()));
}

}  // namespace

Value read_view(Value storage, const ViewLayout& v) { return read_view_from(storage, v, Value()); }

Value read_view_at(Value storage, const ViewLayout& v, Value offset) { return read_view_from(storage, v, offset); }

Value write_view(Value storage, const ViewLayout& v, Value update) {
  hl::Builder& b = storage.builder();
  int64_t n = numel_of(v.sizes);
  if (n == 0) return storage;
  if (covers_storage(v, storage.dim(0))) return hl::reshape(update, {n});
  Value flat = hl::reshape(update, {n});
  if (is_contiguous(v)) {
    return hl::dynamic_update_slice(storage, flat, {hl::constant_int(b, ElementType::kI64, v.offset)});
  }
  // A dense permutation (e.g. an elementwise result that kept a transposed
  // input's strides): the update in memory order is one transpose away,
  // then a contiguous write. A scatter by computed index would make XLA:CPU
  // build an i64 index per element and store them one by one (the small
  // GPT's step spent about a tenth of its time there, issue 14).
  std::vector<int64_t> order = dense_order(v);
  if (!order.empty() && v.offset + n <= storage.dim(0)) {
    Dims core_sizes;
    std::vector<int64_t> core;  // the non-size-1 dims, in the view's order
    for (int64_t d = 0; d < static_cast<int64_t>(v.sizes.size()); ++d)
      if (v.sizes[d] != 1) {
        core.push_back(d);
        core_sizes.push_back(v.sizes[d]);
      }
    Dims perm;
    for (auto d : order) perm.push_back(std::find(core.begin(), core.end(), d) - core.begin());
    Value memory_order = hl::reshape(hl::transpose(hl::reshape(update, core_sizes), perm), {n});
    if (v.offset == 0 && n == storage.dim(0)) return memory_order;
    return hl::dynamic_update_slice(storage, memory_order, {hl::constant_int(b, ElementType::kI64, v.offset)});
  }
  return hl::scatter_1d(storage, element_indices(b, v), update);
}

Value reinterpret_storage(Value v, hlo::ElementType to) {
  using hlo::ElementType;
  ElementType from = v.element();
  if (from == to) return v;
  int64_t n = v.dims()[0];
  if (hlo::is_complex(from)) {  // [N] complex -> [2N] (re, im) pairs
    ElementType part = hlo::complex_component(from);
    Value re = hlo::reshape(v.builder().emit("real", {v}, hlo::TensorType{part, {n}}), {n, 1});
    Value im = hlo::reshape(v.builder().emit("imag", {v}, hlo::TensorType{part, {n}}), {n, 1});
    return reinterpret_storage(hlo::reshape(hlo::concatenate({re, im}, 1), {2 * n}), to);
  }
  if (hlo::is_complex(to)) {
    ElementType part = hlo::complex_component(to);
    Value pairs = hlo::reshape(reinterpret_storage(v, part), {n * hlo::element_bits(from) / hlo::element_bits(part) / 2, 2});
    int64_t m = pairs.dims()[0];
    Value re = hlo::reshape(hlo::slice(pairs, {0, 0}, {m, 1}), {m});
    Value im = hlo::reshape(hlo::slice(pairs, {0, 1}, {m, 2}), {m});
    return v.builder().emit("complex", {re, im}, hlo::TensorType{to, {m}});
  }
  // bool is stored as one byte per element.
  if (from == ElementType::kPred) return reinterpret_storage(hlo::convert(v, ElementType::kU8), to);
  if (to == ElementType::kPred) {
    Value bytes = reinterpret_storage(v, ElementType::kU8);
    return hlo::compare(bytes, hlo::zeros_like(bytes), "NE");
  }
  int fb = hlo::element_bits(from), tb = hlo::element_bits(to);
  if (fb == tb) return hlo::bitcast_convert(v, to);
  if (fb > tb) {  // each element splits into fb/tb narrower ones
    int64_t r = fb / tb;
    Value parts = v.builder().emit("bitcast_convert", {v}, hlo::TensorType{to, {n, r}});
    return hlo::reshape(parts, {n * r});
  }
  int64_t r = tb / fb;
  return v.builder().emit("bitcast_convert", {hlo::reshape(v, {n / r, r})}, hlo::TensorType{to, {n / r}});
}

}  // namespace torch_tpu::lowering
