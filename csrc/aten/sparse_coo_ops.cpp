// Sparse COO ops on tpu beyond sparse gradients (sparse_coo.cpp): what
// graph networks and sparse-matrix code do with an adjacency matrix.
// - PyTorch's device-generic kernels, registered as they are: the
//   zero-preserving unary ops (coalesce, then the op on the values: abs,
//   sqrt, sin, tanh, relu, ...), pow by a nonzero number, sub, cat,
//   unsqueeze, narrow_copy, mv, and to_sparse() of a dense tpu tensor.
// - Written here, where PyTorch's kernels are CPU or CUDA loops, from dense
//   tpu ops: index_select, torch.sparse.softmax / log_softmax and their
//   backward (GAT-style attention over edges), sparse @ sparse.
// Results are those of CPU's kernels (to_dense equal); index order or
// coalescing may differ where CPU's is an implementation detail.
#include <ATen/SparseTensorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_sparse_coo_tensor_unsafe.h>
#include <ATen/ops/_to_sparse_native.h>
#include <ATen/ops/_unique2.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/asin_native.h>
#include <ATen/ops/asinh_native.h>
#include <ATen/ops/atan_native.h>
#include <ATen/ops/atanh_native.h>
#include <ATen/ops/cat_native.h>
#include <ATen/ops/ceil_native.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/deg2rad_native.h>
#include <ATen/ops/erf_native.h>
#include <ATen/ops/erfinv_native.h>
#include <ATen/ops/expm1_native.h>
#include <ATen/ops/floor_native.h>
#include <ATen/ops/frac_native.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isinf_native.h>
#include <ATen/ops/isnan_native.h>
#include <ATen/ops/log1p_native.h>
#include <ATen/ops/mv_native.h>
#include <ATen/ops/nan_to_num_native.h>
#include <ATen/ops/narrow_copy_native.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/rad2deg_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/round_native.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sgn_native.h>
#include <ATen/ops/sign_native.h>
#include <ATen/ops/signbit_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sinh_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tan_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/trunc_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <limits>
#include <string>
#include <vector>

#include "aten/sparse_util.h"

namespace torch_tpu::aten::sparse {
namespace {

using at::Tensor;

// Every pair (i, p) with sorted[p] == keys[i], i ascending, then p: the
// range of each key in `sorted` (searchsorted left and right), expanded.
// Its size depends on the counts, read once.
std::pair<Tensor, Tensor> matching_pairs(const Tensor& sorted, const Tensor& keys) {
  const Tensor lo = at::searchsorted(sorted, keys);
  const Tensor count = at::sub(at::searchsorted(sorted, keys, /*out_int32=*/false, /*right=*/true), lo);
  const Tensor owner = at::repeat_interleave(count);
  const Tensor start = at::sub(at::cumsum(count, 0), count);  // where each range starts in the output
  const Tensor within = at::sub(at::arange(owner.size(0), owner.options()), start.index_select(0, owner));
  return {owner, at::add(lo.index_select(0, owner), within)};
}

// self.index_select(dim, index): for a sparse dim, every stored entry whose
// index along `dim` is index[j] becomes an entry at position j (repeated
// indices repeat it); for a dense dim, the values are selected.
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(index.dim() <= 1 && !index.is_floating_point() && !index.is_complex(),
              "index_select(): Index is supposed to be a vector of integers, got ", index.scalar_type(), " ",
              index.sizes());
  const Tensor idx = index.reshape({-1}).to(at::kLong);
  auto sizes = self.sizes().vec();
  sizes[dim] = idx.size(0);
  if (dim >= self.sparse_dim()) {
    const Tensor values = self._values().index_select(dim - self.sparse_dim() + 1, idx);
    return at::_sparse_coo_tensor_unsafe(self._indices().clone(), values, sizes, self.options())
        ._coalesced_(self.is_coalesced());
  }
  const Tensor along = self._indices().select(0, dim);
  auto [sorted, order] = along.sort();
  auto [owner, position] = matching_pairs(sorted, idx);
  const Tensor entry = order.index_select(0, position);
  Tensor indices = self._indices().index_select(1, entry);
  indices.select(0, dim).copy_(owner);
  return at::_sparse_coo_tensor_unsafe(indices, self._values().index_select(0, entry), sizes, self.options());
}

// Softmax along `dim` over the stored entries only (an absent entry counts
// as -inf, as in torch.sparse.softmax): the entries of a coalesced tensor
// that share every sparse index but `dim` form one group.
struct Groups {
  Tensor id;      // [nnz] group of each entry
  int64_t count;  // number of groups
};

Groups groups_along(const Tensor& coalesced, int64_t dim) {
  const int64_t nnz = coalesced._nnz();
  std::vector<Tensor> rows;
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < coalesced.sparse_dim(); ++d)
    if (d != dim) rows.push_back(coalesced._indices().select(0, d)), sizes.push_back(coalesced.size(d));
  if (rows.empty() || nnz == 0) return {at::zeros({nnz}, coalesced._indices().options()), 1};
  auto [unique, inverse, counts] =
      at::_unique2(flat_positions(at::stack(rows), sizes), /*sorted=*/true, /*return_inverse=*/true);
  return {inverse, unique.size(0)};
}

// Per-group reduction of values [nnz, dense...] ("sum" or "amax"), read
// back at each entry.
Tensor group_reduce(const Tensor& values, const Groups& g, const char* how) {
  auto sizes = values.sizes().vec();
  sizes[0] = g.count;
  Tensor index = g.id;
  for (int64_t d = 1; d < values.dim(); ++d) index = index.unsqueeze(-1);
  index = index.expand(values.sizes());
  const double init = std::string(how) == "amax" ? -std::numeric_limits<double>::infinity() : 0.0;
  return at::full(sizes, init, values.options()).scatter_reduce(0, index, values, how).index_select(0, g.id);
}

Tensor softmax_values(const Tensor& coalesced, int64_t dim, bool log, bool half_to_float) {
  Tensor values = coalesced._values();
  if (half_to_float) values = values.to(at::kFloat);
  if (dim >= coalesced.sparse_dim()) {
    const int64_t vdim = dim - coalesced.sparse_dim() + 1;
    return log ? values.log_softmax(vdim) : values.softmax(vdim);
  }
  const Groups g = groups_along(coalesced, dim);
  const Tensor shifted = at::sub(values, group_reduce(values, g, "amax"));
  const Tensor e = shifted.exp();
  const Tensor total = group_reduce(e, g, "sum");
  return log ? at::sub(shifted, total.log()) : at::div(e, total);
}

Tensor sparse_softmax_impl(const Tensor& self, int64_t dim, bool half_to_float, bool log) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  const Tensor input = self.coalesce();
  const Tensor values = softmax_values(input, dim, log, half_to_float);
  return at::_sparse_coo_tensor_unsafe(input._indices().clone(), values, input.sizes(),
                                       input.options().dtype(values.scalar_type()))
      ._coalesced_(true);
}

Tensor sparse_softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return sparse_softmax_impl(self, dim, half_to_float, /*log=*/false);
}

Tensor sparse_log_softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return sparse_softmax_impl(self, dim, half_to_float, /*log=*/true);
}

// grad_input at the output's entries: out * (g - sum(g * out)) for softmax,
// g - exp(out) * sum(g) for log_softmax, the sums over each group.
Tensor softmax_backward_impl(const Tensor& grad, const Tensor& output, int64_t dim, bool log) {
  dim = c10::maybe_wrap_dim(dim, output.dim());
  const Tensor out = output.coalesce();
  const Tensor y = out._values();
  const Tensor g = grad.is_sparse() ? values_at(grad, out) : grad.index(index_rows(out));
  Tensor values;
  if (dim >= out.sparse_dim()) {
    const int64_t vdim = dim - out.sparse_dim() + 1;
    values = log ? at::sub(g, at::mul(y.exp(), g.sum(vdim, true))) : at::mul(y, at::sub(g, at::mul(g, y).sum(vdim, true)));
  } else {
    const Groups groups = groups_along(out, dim);
    values = log ? at::sub(g, at::mul(y.exp(), group_reduce(g, groups, "sum")))
                 : at::mul(y, at::sub(g, group_reduce(at::mul(g, y), groups, "sum")));
  }
  return at::_sparse_coo_tensor_unsafe(out._indices().clone(), values, out.sizes(), out.options())._coalesced_(true);
}

Tensor sparse_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, const Tensor&) {
  return softmax_backward_impl(grad, output, dim, /*log=*/false);
}

Tensor sparse_log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, const Tensor&) {
  return softmax_backward_impl(grad, output, dim, /*log=*/true);
}

// sparse [M, K] @ sparse [K, N]: every stored (i, k, a) meets every stored
// (k, j, b) (a coalesced right operand keeps row k's entries together), the
// products a * b summed at (i, j) by coalesce.
Tensor sparse_sparse_matmul(const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.sparse_dim() == 2 && self.dense_dim() == 0 && other.sparse_dim() == 2 && other.dense_dim() == 0,
              "sparse @ sparse: expected 2-D sparse matrices without dense dims, got sizes ", self.sizes(), " and ",
              other.sizes());
  TORCH_CHECK(self.size(1) == other.size(0), "mat1 and mat2 shapes cannot be multiplied (", self.size(0), "x",
              self.size(1), " and ", other.size(0), "x", other.size(1), ")");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "sparse @ sparse: expected both operands to have the same "
              "dtype, got ", self.scalar_type(), " and ", other.scalar_type());
  const Tensor a = self.coalesce(), b = other.coalesce();
  auto [which_a, which_b] = matching_pairs(b._indices().select(0, 0), a._indices().select(0, 1));
  const Tensor indices = at::stack({a._indices().select(0, 0).index_select(0, which_a),
                                    b._indices().select(0, 1).index_select(0, which_b)});
  const Tensor values = at::mul(a._values().index_select(0, which_a), b._values().index_select(0, which_b));
  return at::_sparse_coo_tensor_unsafe(indices, values, {self.size(0), other.size(1)}, self.options()).coalesce();
}

Tensor dense_to_sparse_dim(const Tensor& self, int64_t sparse_dim) {
  return at::native::dense_to_sparse(self, sparse_dim);
}

// to_sparse() of a dense tpu tensor: COO only (CSR and the blocked layouts
// are not implemented on tpu).
Tensor dense_to_sparse(const Tensor& self, std::optional<at::Layout> layout, at::OptionalIntArrayRef blocksize,
                       std::optional<int64_t> dense_dim) {
  TORCH_CHECK_NOT_IMPLEMENTED(!layout.has_value() || *layout == at::kSparse, "to_sparse(layout=", *layout,
                              ") on tpu: only the COO layout (torch.sparse_coo) is implemented");
  TORCH_CHECK_NOT_IMPLEMENTED(!blocksize.has_value(), "to_sparse(blocksize=...) on tpu is not implemented");
  return dense_to_sparse_dim(self, self.dim() - dense_dim.value_or(0));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  // Zero-preserving unary ops: PyTorch's kernels coalesce, then apply the op to the values.
#define TPU_SPARSE_UNARY(op)                         \
  m.impl(#op, &at::native::op##_sparse);             \
  m.impl(#op ".out", &at::native::op##_sparse_out);  \
  m.impl(#op "_", &at::native::op##_sparse_);
  TPU_SPARSE_UNARY(abs)
  TPU_SPARSE_UNARY(asin)
  TPU_SPARSE_UNARY(asinh)
  TPU_SPARSE_UNARY(atan)
  TPU_SPARSE_UNARY(atanh)
  TPU_SPARSE_UNARY(ceil)
  TPU_SPARSE_UNARY(deg2rad)
  TPU_SPARSE_UNARY(erf)
  TPU_SPARSE_UNARY(erfinv)
  TPU_SPARSE_UNARY(expm1)
  TPU_SPARSE_UNARY(floor)
  TPU_SPARSE_UNARY(frac)
  TPU_SPARSE_UNARY(log1p)
  TPU_SPARSE_UNARY(rad2deg)
  TPU_SPARSE_UNARY(round)
  TPU_SPARSE_UNARY(sgn)
  TPU_SPARSE_UNARY(sign)
  TPU_SPARSE_UNARY(sin)
  TPU_SPARSE_UNARY(sinh)
  TPU_SPARSE_UNARY(sqrt)
  TPU_SPARSE_UNARY(tan)
  TPU_SPARSE_UNARY(tanh)
  TPU_SPARSE_UNARY(trunc)
  TPU_SPARSE_UNARY(nan_to_num)
#undef TPU_SPARSE_UNARY
  m.impl("relu", &at::native::relu_sparse);
  m.impl("relu_", &at::native::relu_sparse_);
  m.impl("isnan", &at::native::isnan_sparse);
  m.impl("isinf", &at::native::isinf_sparse);
  m.impl("signbit", &at::native::signbit_sparse);
  m.impl("signbit.out", &at::native::signbit_sparse_out);
  m.impl("pow.Tensor_Scalar", &at::native::pow_sparse_scalar);
  m.impl("pow.Tensor_Scalar_out", &at::native::pow_out_sparse_scalar);
  m.impl("sub.Tensor", &at::native::sub_sparse);
  m.impl("sub_.Tensor", &at::native::sub_sparse_);
  m.impl("sub.out", &at::native::sub_out_sparse);
  m.impl("cat", &at::native::cat_sparse);
  m.impl("unsqueeze", &at::native::unsqueeze_sparse);
  m.impl("narrow_copy", &at::native::narrow_copy_sparse);
  m.impl("mv", &at::native::mv_sparse);
  m.impl("_to_sparse", static_cast<Tensor (*)(const Tensor&, std::optional<at::Layout>, at::OptionalIntArrayRef,
                                               std::optional<int64_t>)>(&at::native::sparse_coo_to_sparse));
  m.impl("_to_sparse.sparse_dim", static_cast<Tensor (*)(const Tensor&, int64_t)>(&at::native::sparse_coo_to_sparse));
  // Written here.
  m.impl("index_select", &index_select);
  m.impl("_sparse_softmax", &sparse_softmax);
  m.impl("_sparse_log_softmax", &sparse_log_softmax);
  m.impl("_sparse_softmax_backward_data", &sparse_softmax_backward);
  m.impl("_sparse_log_softmax_backward_data", &sparse_log_softmax_backward);
  m.impl("_sparse_sparse_matmul", &sparse_sparse_matmul);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse", &dense_to_sparse);
  m.impl("_to_sparse.sparse_dim", &dense_to_sparse_dim);
}

}  // namespace torch_tpu::aten::sparse
