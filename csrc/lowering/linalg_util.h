// Shared helpers of the dense linear-algebra rules (linalg_decomp.cpp,
// linalg_solve.cpp). Matrices are [batch..., m, n]; the algorithms flatten
// the batch into one leading dimension B. Values used inside a while body are
// created inside it (iotas, constants): loop regions only see their block
// arguments.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "lowering/registry.h"

namespace torch_tpu::lowering::la {

using hlo::Dims;

inline Value ci(Builder& b, int64_t v) { return hlo::constant_int(b, ElementType::kI32, v); }
inline Value bc(Value scalar, const Dims& dims) { return hlo::broadcast_in_dim(scalar, dims, {}); }
inline Value iota_i(Builder& b, const Dims& dims, int64_t dim) { return hlo::iota(b, ElementType::kI32, dims, dim); }

inline Dims batch_of(const Dims& d) { return Dims(d.begin(), d.end() - 2); }
inline int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}
inline Dims cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// [..., m, n] -> [..., n, m]
inline Value mT(Value a) {
  Dims perm;
  for (int64_t i = 0; i < a.rank(); ++i) perm.push_back(i);
  if (a.rank() >= 2) std::swap(perm[a.rank() - 1], perm[a.rank() - 2]);
  return hlo::transpose(a, perm);
}

// Batched matmul, both with the same batch dims.
inline Value mm(Value a, Value b) {
  int64_t r = a.rank();
  Dims batch;
  for (int64_t i = 0; i < r - 2; ++i) batch.push_back(i);
  return hlo::dot_general(a, b, {batch, batch, {r - 1}, {r - 2}}, a.element(), "HIGHEST");
}

// Masks comparing the row/column index of a [..., m, n] shape.
inline Value row_idx(Builder& b, const Dims& d) { return iota_i(b, d, static_cast<int64_t>(d.size()) - 2); }
inline Value col_idx(Builder& b, const Dims& d) { return iota_i(b, d, static_cast<int64_t>(d.size()) - 1); }

// Lower (k<=0 diagonals kept from k) / upper triangle: keep j - i <= k (tril)
// or j - i >= k (triu).
inline Value tril(Value a, int64_t k = 0) {
  Builder& b = a.builder();
  Value diff = hlo::sub(col_idx(b, a.dims()), row_idx(b, a.dims()));
  return hlo::select(hlo::compare(diff, bc(ci(b, k), a.dims()), "LE"), a, hlo::zeros_like(a));
}
inline Value triu(Value a, int64_t k = 0) {
  Builder& b = a.builder();
  Value diff = hlo::sub(col_idx(b, a.dims()), row_idx(b, a.dims()));
  return hlo::select(hlo::compare(diff, bc(ci(b, k), a.dims()), "GE"), a, hlo::zeros_like(a));
}

inline Value eye(Builder& b, ElementType e, const Dims& d) {
  Value eq = hlo::compare(row_idx(b, d), col_idx(b, d), "EQ");
  return hlo::select(eq, hlo::full(b, e, d, 1), hlo::full(b, e, d, 0));
}

// Diagonal of [..., m, n] -> [..., min(m, n)].
inline Value diagonal(Value a) {
  Builder& b = a.builder();
  int64_t m = a.dim(a.rank() - 2), n = a.dim(a.rank() - 1), k = std::min(m, n);
  Dims d = a.dims();
  Value sq = hlo::slice(a, Dims(d.size(), 0), cat(batch_of(d), {k, k}));
  Value eq = hlo::compare(row_idx(b, sq.dims()), col_idx(b, sq.dims()), "EQ");
  return hlo::reduce(hlo::select(eq, sq, hlo::zeros_like(sq)), {static_cast<int64_t>(d.size()) - 1},
                     hlo::ReduceKind::kSum);
}

// Sum of x where mask holds, over `dim` (exact: no 0*inf).
inline Value pick(Value x, Value mask, int64_t dim) {
  return hlo::reduce(hlo::select(mask, x, hlo::zeros_like(x)), {dim}, hlo::ReduceKind::kSum);
}

// Broadcast [batch..., r, c] to the batch dims `batch` (numpy rules).
inline Value bcast_batch(Value a, const Dims& batch) {
  Dims d = cat(batch, {a.dim(a.rank() - 2), a.dim(a.rank() - 1)});
  return a.dims() == d ? a : hlo::broadcast_to(a, d);
}

// Elementwise helpers with a scalar of the same type.
inline Value scal(Value like, double v) { return hlo::full_like(like, v); }

// Permutation matrix from a row order: P[b, i, r] = (perm[b, i] == r), so
// P @ X == X[perm] (rows).
inline Value perm_matrix(Value perm, ElementType e) {
  Builder& b = perm.builder();
  int64_t n = perm.dim(perm.rank() - 1);
  Dims d = perm.dims();
  d.push_back(n);
  Dims keep;
  for (int64_t i = 0; i < perm.rank(); ++i) keep.push_back(i);
  Value pb = hlo::broadcast_in_dim(perm, d, keep);
  Value eq = hlo::compare(pb, col_idx(b, d), "EQ");
  return hlo::select(eq, hlo::full(b, e, d, 1), hlo::full(b, e, d, 0));
}

inline void check_float(LowerCtx& ctx, std::string_view name) {
  at::ScalarType t = ctx.dtype_of(name);
  TORCH_CHECK(t == at::kFloat || t == at::kDouble, ctx.op_name(), ": tpu supports float32 and float64 inputs, got ",
              t);
}

// Partial-pivot LU of [B, m, n] (LAPACK getf2 order): returns packed LU,
// 1-based pivots [B, min(m,n)] (i32), the row order perm [B, m] (i32) with
// LU = A[perm] factorisation, and info [B] (i32).
struct LuResult {
  Value lu, pivots, perm, info;
};
LuResult lu_factor(Value a);
// Row order from 1-based LAPACK pivots [B, k] for m rows.
Value perm_from_pivots(Value pivots, int64_t m);
// Solves with a packed LU (square n): op(A) X = B for [B, n, k] rhs.
Value lu_solve(Value lu, Value perm, Value rhs, bool adjoint);

}  // namespace torch_tpu::lowering::la
