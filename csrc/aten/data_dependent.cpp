// Ops whose result shape depends on the data (nonzero, masked_select,
// unique, bincount, repeat_interleave, boolean-mask indexing). Each reads
// the size it needs from the device (one small program and a sync), then
// runs a fixed-size program for that size: every distinct size compiles
// once. The fixed-size rules live in csrc/lowering/compaction.cpp.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_assert_async.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/count_nonzero.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/expand.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/nonzero_static.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

namespace {

int64_t read_int(const at::Tensor& t) { return t.item<int64_t>(); }

// ---- internal fixed-size ops (rules in compaction.cpp) ----------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> call_unique(const at::Tensor& self, std::optional<int64_t> dim,
                                                           bool consecutive) {
  static auto count_op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("tpu_internal::_tpu_unique_count", "")
                             .typed<at::Tensor(const at::Tensor&, std::optional<int64_t>, bool)>();
  static auto unique_op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("tpu_internal::_tpu_unique", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, std::optional<int64_t>, bool,
                                                                int64_t)>();
  int64_t rows = dim ? self.size(*dim) : self.numel();
  int64_t k = rows == 0 ? 0 : read_int(count_op.call(self, dim, consecutive));
  if (rows == 0 || (dim && self.numel() == 0)) {
    // Nothing to compute; shapes as CPU gives them.
    auto sizes = self.sizes().vec();
    if (dim) sizes[*dim] = k;
    at::Tensor values = dim ? at::empty(sizes, self.options()) : at::empty({0}, self.options());
    at::Tensor inverse = at::empty(dim ? at::IntArrayRef{rows} : self.sizes(), self.options().dtype(at::kLong));
    return {values, inverse, at::empty({k}, self.options().dtype(at::kLong))};
  }
  return unique_op.call(self, dim, consecutive, k);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_meta(const at::Tensor& self, std::optional<int64_t> dim,
                                                           bool consecutive, int64_t num) {
  auto sizes = self.sizes().vec();
  std::vector<int64_t> values = {num};
  std::vector<int64_t> inverse = sizes;
  if (dim) {
    values = sizes;
    values[*dim] = num;
    inverse = {sizes[*dim]};
  }
  auto opts = self.options();
  return {at::empty(values, opts), at::empty(inverse, opts.dtype(at::kLong)), at::empty({num}, opts.dtype(at::kLong))};
}

at::Tensor unique_count_meta(const at::Tensor& self, std::optional<int64_t>, bool) {
  return at::empty({}, self.options().dtype(at::kLong));
}

// Drops what the caller did not ask for, as CPU does (empty tensors).
std::tuple<at::Tensor, at::Tensor, at::Tensor> trim(std::tuple<at::Tensor, at::Tensor, at::Tensor> r,
                                                    bool return_inverse, bool return_counts) {
  auto& [values, inverse, counts] = r;
  if (!return_inverse) inverse = at::empty({0}, inverse.options());
  if (!return_counts) counts = at::empty({0}, counts.options());
  return r;
}

// ---- kernels ------------------------------------------------------------------

at::Tensor tpu_nonzero(const at::Tensor& self) {
  int64_t n = read_int(at::count_nonzero(self));
  return at::nonzero_static(self, n, -1);
}

at::Tensor& tpu_nonzero_out(const at::Tensor& self, at::Tensor& out) {
  at::Tensor r = tpu_nonzero(self);
  out.resize_(r.sizes());
  return out.copy_(r);
}

at::Tensor tpu_masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto [s, m] = at::expand_outplace(self, mask);
  at::Tensor flat_mask = m->reshape({-1});
  at::Tensor idx = tpu_nonzero(flat_mask).reshape({-1});
  return at::index_select(s->reshape({-1}), 0, idx);
}

at::Tensor& tpu_masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(out);  // CPU's checks: out may not be an input, nor expanded
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  at::Tensor r = tpu_masked_select(self, mask);
  at::native::resize_output(out, r.sizes());  // warns, as CPU does, when a non-empty out changes size
  return out.copy_(r);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts) {
  return trim(call_unique(self, std::nullopt, false), return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor> tpu_unique1(const at::Tensor& self, bool sorted, bool return_inverse) {
  auto [v, i, c] = tpu_unique2(self, sorted, return_inverse, false);
  return {v, i};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique_dim(const at::Tensor& self, int64_t dim, bool sorted,
                                                          bool return_inverse, bool return_counts) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  return trim(call_unique(self, dim, false), return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique_dim_consecutive(const at::Tensor& self, int64_t dim,
                                                                      bool return_inverse, bool return_counts) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  return trim(call_unique(self, dim, true), return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  if (dim) return tpu_unique_dim_consecutive(self, *dim, return_inverse, return_counts);
  return trim(call_unique(self, std::nullopt, true), return_inverse, return_counts);
}

at::Tensor tpu_bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  // CPU's dispatch refuses a non-integer dtype first (NotImplementedError).
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  const at::Tensor weights = weights_opt.value_or(at::Tensor());
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  int64_t n = minlength;
  if (self.numel() > 0) {
    auto [lo, hi] = at::aminmax(self);
    TORCH_CHECK(read_int(lo) >= 0, "bincount only supports 1-d non-negative integral inputs.");
    n = std::max(n, read_int(hi) + 1);
  }
  // CPU: float weights give float, any other weights double, none int64.
  at::ScalarType dtype = !weights.defined()                           ? at::kLong
                         : weights.scalar_type() == at::kFloat        ? at::kFloat
                                                                      : at::kDouble;
  at::Tensor out = at::zeros({n}, self.options().dtype(dtype));
  if (self.numel() == 0) return out;
  at::Tensor w = weights.defined() ? weights.to(dtype) : at::ones({self.size(0)}, self.options().dtype(dtype));
  // scatter takes int32/int64 indices; CPU's bincount takes any integer type.
  at::Tensor index = self.scalar_type() == at::kInt ? self : self.to(at::kLong);
  return out.scatter_add_(0, index, w);
}

at::Tensor tpu_repeat_interleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  if (repeats.size(0) == 0) return at::empty({0}, repeats.options().dtype(at::kLong));
  at::Tensor cum = at::cumsum(repeats, 0, at::kLong);
  int64_t total;
  if (output_size) {
    total = output_size->expect_int();
    // CPU's check, made on the device (no host read: output_size is how a
    // caller avoids one): a wrong output_size raises at the next sync.
    at::_assert_async(at::eq(cum[-1], total),
                      "repeat_interleave: allocated size does not match required size (output_size " +
                          std::to_string(total) + ")");
  } else {
    auto [lo, hi] = at::aminmax(repeats);
    TORCH_CHECK(read_int(lo) >= 0, "repeats can not be negative");
    total = read_int(cum[-1]);
  }
  // Output position j belongs to the first i with cum[i] > j.
  at::Tensor pos = at::arange(total, repeats.options().dtype(at::kLong));
  return pos.unsqueeze(1).ge(cum.unsqueeze(0)).sum(1);
}

// equal(a, b) -> bool: same sizes and every element equal (a host value).
bool tpu_equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

// ---- boolean masks in advanced indexing ------------------------------------------

// Replaces each bool/byte mask by the long index tensors of its nonzero
// positions (one per masked dim), as PyTorch's expandTensors does; nullopt
// when there is no mask.
std::optional<c10::List<std::optional<at::Tensor>>> expand_masks(const at::Tensor& self,
                                                                  const c10::List<std::optional<at::Tensor>>& indices) {
  bool any = false;
  for (const auto& i : indices) {
    std::optional<at::Tensor> t = i;
    if (t && t->defined() && (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte)) any = true;
  }
  if (!any) return std::nullopt;
  c10::List<std::optional<at::Tensor>> out;
  int64_t dim = 0;
  for (const auto& i : indices) {
    std::optional<at::Tensor> t = i;
    if (!t || !t->defined()) {
      out.push_back(std::nullopt);
      ++dim;
      continue;
    }
    if (t->scalar_type() != at::kBool && t->scalar_type() != at::kByte) {
      out.push_back(t);
      ++dim;
      continue;
    }
    for (int64_t j = 0; j < t->dim(); ++j) {
      int64_t src = dim + j;
      TORCH_CHECK_INDEX(src < self.dim() && t->size(j) == self.size(src), "The shape of the mask ", t->sizes(),
                        " at index ", j, " does not match the shape of the indexed tensor ", self.sizes(),
                        " at index ", src);
    }
    at::Tensor mask = t->scalar_type() == at::kByte ? t->to(at::kBool) : *t;
    at::Tensor nz = tpu_nonzero(mask);
    for (int64_t j = 0; j < mask.dim(); ++j) out.push_back(nz.select(1, j));
    dim += mask.dim();
  }
  return out;
}

// Calls the lowering engine for `op` with `args` (boxed), returning the stack.
torch::jit::Stack engine(const char* name, const char* overload, torch::jit::Stack args) {
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  exec::run_lowered_op(handle, &args);
  return args;
}

at::Tensor tpu_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  auto expanded = expand_masks(self, indices);
  auto out = engine("aten::index", "Tensor", {self, expanded ? *expanded : indices});
  return out[0].toTensor();
}

at::Tensor& tpu_index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  auto expanded = expand_masks(self, indices);
  engine("aten::_index_put_impl_", "", {self, expanded ? *expanded : indices, values, accumulate, unsafe});
  return self;
}

}  // namespace

TORCH_LIBRARY(tpu_internal, m) {
  m.def("_tpu_unique_count(Tensor self, int? dim, bool consecutive) -> Tensor");
  m.def("_tpu_unique(Tensor self, int? dim, bool consecutive, int num) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(tpu_internal, Meta, m) {
  m.impl("_tpu_unique_count", &unique_count_meta);
  m.impl("_tpu_unique", &unique_meta);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", &tpu_nonzero);
  m.impl("nonzero.out", &tpu_nonzero_out);
  m.impl("masked_select", &tpu_masked_select);
  m.impl("masked_select.out", &tpu_masked_select_out);
  m.impl("_unique", &tpu_unique1);
  m.impl("_unique2", &tpu_unique2);
  m.impl("unique_dim", &tpu_unique_dim);
  m.impl("unique_consecutive", &tpu_unique_consecutive);
  m.impl("unique_dim_consecutive", &tpu_unique_dim_consecutive);
  m.impl("bincount", &tpu_bincount);
  m.impl("repeat_interleave.Tensor", &tpu_repeat_interleave);
  m.impl("index.Tensor", &tpu_index);
  m.impl("equal", &tpu_equal);
  m.impl("_index_put_impl_", &tpu_index_put_impl);
}

}  // namespace torch_tpu::aten
