// Sparse COO tensors on tpu, as far as sparse gradients need them (more
// sparse ops, for graph networks, are in sparse_coo_ops.cpp):
// nn.Embedding(sparse=True) and nn.EmbeddingBag(sparse=True) backward, the
// accumulation of their gradients into .grad, the SGD, SparseAdam and
// Adagrad steps that read them, the basic sparse API (coalesce, to_dense,
// _indices/_values, .to/.cpu, clone, sum, printing), and sparse @ dense
// products (torch.sparse.mm, the adjacency products of graph networks).
//
// A sparse tensor is a SparseTensorImpl whose indices ([sparse_dim, nnz]
// int64) and values ([nnz, dense sizes...]) are ordinary tpu tensors, so
// every kernel below is made of dense tpu ops, lowered, fused and compiled
// like any other. SparseTensorImpl takes its key set from the device, so a
// tpu one gets SparsePrivateUse1, and only the kernels registered for that
// key run on it. Where PyTorch's own kernel only touches the metadata or
// calls other ops (SparseTensor.cpp), it is registered as it is; where its
// kernel is a CPU or CUDA loop (add, mul, coalesce, sparse_mask, mm) the tpu one
// is written here with the CUDA kernels' results: sums of sparse tensors are
// concatenated, not merged, and coalesce sums duplicates.
// Every other op on a sparse tpu tensor raises NotImplementedError naming
// it (the fallback at the end), never reaching a dense kernel.
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/core/stack.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_embedding_bag_sparse_backward.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_unsafe.h>
#include <ATen/ops/_sparse_sparse_matmul.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_to_dense_native.h>
#include <ATen/ops/_unique2.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/add.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/norm.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ExpandUtils.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "aten/sparse_util.h"
#include "exec/op_runner.h"

namespace torch_tpu::aten::sparse {
namespace {

using at::Tensor;

// t * s, or t itself when s is 1 (alpha and beta are 1 in almost every call).
Tensor scaled(const Tensor& t, const at::Scalar& s) {
  return s.isIntegral(true) && s.toLong() == 1 ? t : at::mul(t, s);
}

// Gives `out` (a sparse tensor, possibly empty or `self`) these indices and
// values with `like`'s sizes and dims.
void set_sparse(Tensor& out, const Tensor& like, const Tensor& indices, const Tensor& values, bool coalesced) {
  TORCH_CHECK(out.is_sparse(), "the result of a sparse op on tpu must be sparse, got a ", out.layout(), " out=");
  at::sparse::get_sparse_impl(out)->raw_resize_(like.sparse_dim(), like.dense_dim(), like.sizes());
  at::sparse::alias_into_sparse(out, indices, values);
  out._coalesced_(coalesced);
}

// Duplicate indices summed, indices sorted (row-major order of the sparse
// dims), as CPU's and CUDA's _coalesce give them.
Tensor coalesce(const Tensor& self) {
  const int64_t nnz = self._nnz();
  if (nnz < 2) return at::native::clone_sparse(self)._coalesced_(true);
  const auto sizes = self.sizes().slice(0, self.sparse_dim());
  auto [unique, inverse, counts] =
      at::_unique2(flat_positions(self._indices(), sizes), /*sorted=*/true, /*return_inverse=*/true);
  const Tensor old_values = self._values();
  auto value_sizes = old_values.sizes().vec();
  value_sizes[0] = unique.size(0);
  Tensor values = at::zeros(value_sizes, old_values.options()).index_add_(0, inverse, old_values);
  // Back from flat positions to one row per sparse dim, the last dim fastest.
  std::vector<Tensor> rows(sizes.size());
  Tensor rest = unique;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    rows[d] = at::remainder(rest, sizes[d]);
    rest = at::floor_divide(rest, sizes[d]);
  }
  return at::_sparse_coo_tensor_unsafe(at::stack(rows), values, self.sizes(), self.options())._coalesced_(true);
}

void check_same_sizes(const char* op, const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.sizes().equals(other.sizes()), op, ": expected 'self' and 'other' to have same size, but self has size ",
              self.sizes(), " while other has size ", other.sizes(),
              " (FYI: sparse addition does not currently support broadcasting)");
}

// add(dense, sparse) scatters the values into a copy of the dense tensor;
// add(sparse, sparse) concatenates indices and values (an uncoalesced sum,
// as CUDA's); add(sparse, dense) is refused, as on CPU and CUDA.
Tensor& add_out(const Tensor& self, const Tensor& other, const at::Scalar& alpha, Tensor& out) {
  TORCH_CHECK(self.is_sparse() || !out.is_sparse() || !other.is_sparse(),
              "add(dense, sparse) on tpu: out= must be a dense tensor");
  TORCH_CHECK(!(self.is_sparse() && !other.is_sparse()),
              "add(sparse, dense) is not supported. Use add(dense, sparse) instead.");
  check_same_sizes("add", self, other);
  const auto dtype = out.scalar_type();
  if (!self.is_sparse()) {
    if (!out.is_same(self)) {
      at::native::resize_output(out, self.sizes());
      out.copy_(self);
    }
    if (other._nnz() == 0) return out;
    out.index_put_(index_rows(other), scaled(other._values().to(dtype), alpha), /*accumulate=*/true);
    return out;
  }
  TORCH_CHECK(self.sparse_dim() == other.sparse_dim() && self.dense_dim() == other.dense_dim(),
              "add: sparse tensors with ", self.sparse_dim(), " and ", other.sparse_dim(), " sparse dims and ",
              self.dense_dim(), " and ", other.dense_dim(), " dense dims cannot be added");
  const Tensor other_values = scaled(other._values().to(dtype), alpha);
  const bool self_empty = self._nnz() == 0, other_empty = other._nnz() == 0;
  const Tensor indices = at::cat({self._indices(), other._indices()}, 1);
  const Tensor values = at::cat({self._values().to(dtype), other_values}, 0);
  const bool coalesced = (self_empty && other.is_coalesced()) || (other_empty && self.is_coalesced());
  set_sparse(out, self, indices, values, coalesced);
  return out;
}

// sparse * dense: the dense operand (broadcast to the sparse one's sizes)
// read at the stored indices, the indices kept; sparse * sparse: the
// entries both store (keys matched on the coalesced operands), as the
// product of the dense tensors would have them.
Tensor sparse_times_dense(const Tensor& sparse, const Tensor& dense) {
  TORCH_CHECK(at::infer_size(sparse.sizes(), dense.sizes()) == sparse.sizes(), "mul: the dense operand's size ",
              dense.sizes(), " does not broadcast to the sparse operand's ", sparse.sizes());
  return at::mul(sparse._values(), dense.expand(sparse.sizes()).index(index_rows(sparse)));
}

Tensor& sparse_times_sparse(const Tensor& self, const Tensor& other, Tensor& out) {
  check_same_sizes("mul", self, other);
  TORCH_CHECK(self.sparse_dim() == other.sparse_dim(), "mul: sparse tensors with ", self.sparse_dim(), " and ",
              other.sparse_dim(), " sparse dims cannot be multiplied");
  const Tensor a = self.coalesce(), b = other.coalesce();
  auto [at_b, in_b] = find_entries(b, a);
  const Tensor pick = at::nonzero(in_b).squeeze(1);
  const Tensor values = at::mul(a._values().index_select(0, pick), b._values().index_select(0, at_b.index_select(0, pick)));
  set_sparse(out, self, a._indices().index_select(1, pick), values.to(out.scalar_type()), /*coalesced=*/true);
  return out;
}

// A sparse tensor times a number (a 0-dim tensor, or a Python scalar that
// mul.Scalar wraps): the values are scaled, the indices kept. Times a
// dense or a sparse tensor: above.
Tensor& mul_out(const Tensor& self, const Tensor& other, Tensor& out) {
  const bool self_scalar = !self.is_sparse() && self.dim() == 0;
  const bool other_scalar = !other.is_sparse() && other.dim() == 0;
  if (self.is_sparse() && other.is_sparse()) return sparse_times_sparse(self, other, out);
  if (!self_scalar && !other_scalar) {
    const Tensor& sparse = self.is_sparse() ? self : other;
    const Tensor values = sparse_times_dense(sparse, self.is_sparse() ? other : self).to(out.scalar_type());
    set_sparse(out, sparse, sparse._indices().clone(), values, sparse.is_coalesced());
    return out;
  }
  const Tensor& sparse = self_scalar ? other : self;
  const Tensor& scalar = self_scalar ? self : other;
  if (out.is_same(sparse) && out.scalar_type() == sparse.scalar_type()) {
    Tensor values = out._values();
    values.mul_(scalar);
    return out;
  }
  const Tensor values = at::mul(sparse._values(), scalar).to(out.scalar_type());
  set_sparse(out, sparse, sparse._indices().clone(), values, sparse.is_coalesced());
  return out;
}

// dense.sparse_mask(mask): the dense tensor's entries at the mask's indices
// (SparseAdam and Adagrad read their state this way).
Tensor sparse_mask(const Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.sizes().equals(self.sizes()), "sparse_mask(): operands have incompatible sizes; self has size ",
              self.sizes(), " but mask has size ", mask.sizes());
  // A sparse self (the gradient of a sparse tensor's values) is looked up by key.
  const Tensor values = self.is_sparse() ? values_at(self, mask) : self.index(index_rows(mask));
  return at::_sparse_coo_tensor_unsafe(mask._indices().clone(), values, mask.sizes(),
                                       mask.options().dtype(self.scalar_type()))
      ._coalesced_(mask.is_coalesced());
}

// sparse [M, K] @ dense [K, N] (torch.sparse.mm, a graph's adjacency times
// features): each stored entry (i, k, v) adds v * dense[k] to row i. The
// dense operand's gradient (mat1.t().mm(grad)) runs through here too, and
// dense @ sparse as its transpose; sparse @ sparse is sparse_coo_ops.cpp's.
Tensor sparse_dense_mm(const Tensor& self, const Tensor& mat2) {
  if (self.is_sparse() && mat2.is_sparse()) return at::_sparse_sparse_matmul(self, mat2);  // sparse_coo_ops.cpp
  if (!self.is_sparse()) return sparse_dense_mm(mat2.t(), self.t()).t();  // dense @ sparse = (sparse^T @ dense^T)^T
  TORCH_CHECK(self.sparse_dim() == 2 && self.dense_dim() == 0 && mat2.dim() == 2,
              "mm: expected a 2-D sparse matrix and a 2-D dense matrix, got sizes ", self.sizes(), " and ", mat2.sizes());
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", self.size(0), "x",
              self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "mm: expected mat1 and mat2 to have the same dtype, but got: ",
              self.scalar_type(), " != ", mat2.scalar_type());
  const Tensor indices = self._indices();
  const Tensor terms = at::mul(mat2.index_select(0, indices.select(0, 1)), self._values().unsqueeze(1));
  return at::zeros({self.size(0), mat2.size(1)}, mat2.options()).index_add_(0, indices.select(0, 0), terms);
}

// beta * self + alpha * (sparse @ dense), what torch.sparse.mm and
// torch.sparse.addmm reach; beta == 0 ignores self (NaNs included), as BLAS.
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const at::Scalar& beta,
             const at::Scalar& alpha) {
  const Tensor product = scaled(sparse_dense_mm(mat1, mat2), alpha);
  if (beta.toComplexDouble() == 0.0) return product;
  return at::add(scaled(self.expand(product.sizes()), beta), product);
}

// The sum of every element: the stored values' sum (duplicates included, as
// they add up in the dense tensor).
Tensor sum(const Tensor& self, std::optional<at::ScalarType> dtype) { return self._values().sum(dtype); }

// The p-norm of every element: coalesced first (|a + b| is not |a| + |b|),
// then the values' norm, as CPU's and CUDA's native_norm. Norms along some
// dims are not implemented.
Tensor norm(const Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim) {
  TORCH_CHECK_NOT_IMPLEMENTED(dim.empty() || static_cast<int64_t>(dim.size()) == self.dim(),
                              "norm of a sparse tensor on tpu along some dims (", dim, ") is not implemented");
  return self.coalesce()._values().norm(p.value_or(2.0));
}

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
//   maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
//   per_sample_weights, padding_idx): the dense gradient is a lowering rule
// (lowering/embedding.cpp); the sparse one is PyTorch's composite
// _embedding_bag_sparse_backward (an index_select of the bags' gradients,
// then embedding's sparse backward), whose ops all run on tpu.
constexpr size_t kBagBackwardArgs = 12;
void embedding_bag_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!torch::jit::peek(*stack, 9, kBagBackwardArgs).toBool()) return exec::run_lowered_op(op, stack);
  auto args = torch::jit::last(*stack, kBagBackwardArgs);
  const Tensor grad = args[0].toTensor(), indices = args[1].toTensor(), offsets = args[2].toTensor();
  Tensor offset2bag = args[3].toTensor();
  if (indices.numel() != 0 && offset2bag.numel() == 0)  // the bag of each index, when the forward gave none
    offset2bag = at::sub(at::searchsorted(offsets, at::arange(indices.numel(), offsets.options()), false, true), 1);
  Tensor result = at::_embedding_bag_sparse_backward_symint(
      grad, indices, offsets, offset2bag, args[4].toTensor(), args[6].toSymInt(), args[7].toBool(), args[8].toInt(),
      args[10].toOptional<Tensor>(), args[11].toInt());
  torch::jit::drop(*stack, kBagBackwardArgs);
  torch::jit::push(*stack, std::move(result));
}

void not_implemented_for_sparse(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Could not run '", op.schema().operator_name(),
                              "' on a sparse COO tensor on tpu: tpu sparse tensors cover sparse gradients "
                              "(Embedding/EmbeddingBag with sparse=True, their accumulation, SGD, SparseAdam, "
                              "Adagrad), coalesce, to_dense, add, sub, mul, div by a number, sum, norm, products "
                              "with dense or sparse matrices, softmax, index_select, cat and the zero-preserving "
                              "elementwise ops; convert with to_dense() first");
}

}  // namespace

c10::List<std::optional<Tensor>> index_rows(const Tensor& sparse) {
  const Tensor indices = sparse._indices();
  c10::List<std::optional<Tensor>> rows;
  for (int64_t d = 0; d < sparse.sparse_dim(); ++d) rows.push_back(indices.select(0, d));
  return rows;
}

Tensor flat_positions(const Tensor& indices, at::IntArrayRef sizes) {
  Tensor flat = indices.select(0, 0);
  for (size_t d = 1; d < sizes.size(); ++d) flat = at::add(at::mul(flat, sizes[d]), indices.select(0, d));
  return flat;
}

std::pair<Tensor, Tensor> find_entries(const Tensor& source, const Tensor& wanted) {
  const auto sizes = source.sizes().slice(0, source.sparse_dim());
  const int64_t nnz = source._nnz();
  const Tensor keys = flat_positions(wanted._indices(), sizes);
  if (nnz == 0) return {at::zeros_like(keys), at::zeros_like(keys, keys.options().dtype(at::kBool))};
  const Tensor stored = flat_positions(source._indices(), sizes);
  const Tensor position = at::searchsorted(stored, keys).clamp_max(nnz - 1);
  return {position, at::eq(stored.index_select(0, position), keys)};
}

Tensor values_at(const Tensor& self, const Tensor& mask) {
  const Tensor source = self.coalesce();  // sorted keys, one entry each
  const Tensor values = source._values();
  if (source._nnz() == 0) {
    auto sizes = values.sizes().vec();
    sizes[0] = mask._nnz();
    return at::zeros(sizes, values.options());
  }
  auto [position, found] = find_entries(source, mask);
  for (int64_t d = 1; d < values.dim(); ++d) found = found.unsqueeze(-1);
  return at::where(found, values.index_select(0, position), at::zeros({}, values.options()));
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  // PyTorch's own kernels: metadata, or calls to other ops.
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", &at::native::new_with_dims_and_tensor_sparse_symint);
  m.impl("_sparse_coo_tensor_with_dims", &at::native::new_with_dims_sparse);
  m.impl("empty.memory_format", &at::native::empty_sparse_symint);
  m.impl("_nnz", &at::native::_nnz_sparse);
  m.impl("_indices", &at::native::_indices_sparse);
  m.impl("_values", &at::native::_values_sparse);
  m.impl("indices", &at::native::indices_sparse);
  m.impl("values", &at::native::values_sparse);
  m.impl("sparse_dim", &at::native::sparse_dim_sparse);
  m.impl("dense_dim", &at::native::dense_dim_sparse);
  m.impl("is_coalesced", &at::native::is_coalesced_sparse);
  m.impl("_coalesced_", &at::native::_coalesced_sparse_);
  m.impl("sparse_resize_", &at::native::sparse_resize_);
  m.impl("sparse_resize_and_clear_", &at::native::sparse_resize_and_clear_);
  m.impl("resize_as_sparse_", &at::native::resize_as_sparse_);
  m.impl("copy_", &at::native::copy_sparse_wrapper_);
  m.impl("copy_sparse_to_sparse_", &at::native::copy_sparse_);
  m.impl("clone", &at::native::clone_sparse);
  m.impl("zero_", &at::native::zero_sparse_);
  m.impl("_to_dense", &at::native::sparse_to_dense);
  m.impl("neg", &at::native::neg_sparse);
  m.impl("neg_", &at::native::neg_sparse_);
  m.impl("neg.out", &at::native::neg_out_sparse);
  m.impl("add.Tensor", &at::native::add_sparse);
  m.impl("add_.Tensor", &at::native::add_sparse_);
  m.impl("mul.Tensor", &at::native::mul_sparse);
  m.impl("mul_.Tensor", &at::native::mul_sparse_);
  // Written here (PyTorch's are CPU and CUDA loops).
  m.impl("add.out", &add_out);
  m.impl("mul.out", &mul_out);
  m.impl("_coalesce", &coalesce);
  m.impl("sparse_mask", &sparse_mask);
  m.impl("mm", &sparse_dense_mm);
  m.impl("addmm", &addmm);
  m.impl("sum", &sum);
  m.impl("norm.ScalarOpt_dim", &norm);
  // Division by a number (PyTorch's kernels, device-generic): the values are
  // divided, after coalescing when a rounding mode makes it matter.
  using Div = Tensor (*)(const Tensor&, const Tensor&);
  using DivMode = Tensor (*)(const Tensor&, const Tensor&, std::optional<c10::string_view>);
  using DivIn = Tensor& (*)(Tensor&, const Tensor&);
  using DivInMode = Tensor& (*)(Tensor&, const Tensor&, std::optional<c10::string_view>);
  using DivOut = Tensor& (*)(const Tensor&, const Tensor&, Tensor&);
  using DivOutMode = Tensor& (*)(const Tensor&, const Tensor&, std::optional<c10::string_view>, Tensor&);
  m.impl("div.Tensor", static_cast<Div>(&at::native::div_sparse));
  m.impl("div.Tensor_mode", static_cast<DivMode>(&at::native::div_sparse));
  m.impl("div_.Tensor", static_cast<DivIn>(&at::native::div_sparse_));
  m.impl("div_.Tensor_mode", static_cast<DivInMode>(&at::native::div_sparse_));
  m.impl("div.out", static_cast<DivOut>(&at::native::div_out_sparse_zerodim));
  m.impl("div.out_mode", static_cast<DivOutMode>(&at::native::div_out_sparse_zerodim));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag_backward", torch::CppFunction::makeFromBoxedFunction<&embedding_bag_backward>());
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&not_implemented_for_sparse>());
}

}  // namespace torch_tpu::aten::sparse
