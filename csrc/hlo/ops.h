// Typed helpers over Builder::emit for the StableHLO ops the lowering rules
// use. Each checks nothing beyond what it needs to compute its result type:
// shape semantics belong to the rules (and PyTorch's meta kernels).
#pragma once

#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::hlo {

using Dims = std::vector<int64_t>;

// ---- constants and shapes ---------------------------------------------
// A rank-0 constant of element type `e` holding `v` (exact for every type:
// floats are printed as bit patterns, so inf and nan survive).
Value constant(Builder& b, ElementType e, double v);
Value constant_int(Builder& b, ElementType e, int64_t v);
// The smallest and largest values of `e` (-inf/+inf for floats, false/true
// for pred): the identities of max and min, the filler a max ignores.
Value lowest(Builder& b, ElementType e);
Value highest(Builder& b, ElementType e);
// `v` broadcast to `dims`.
Value full(Builder& b, ElementType e, const Dims& dims, double v);
Value zeros_like(Value x);
// `v` in x's element type and shape.
Value full_like(Value x, double v);
Value iota(Builder& b, ElementType e, const Dims& dims, int64_t dim);

Value convert(Value x, ElementType e);  // no-op when already `e`
Value bitcast_convert(Value x, ElementType e);
Value reshape(Value x, const Dims& dims);
Value transpose(Value x, const Dims& perm);
Value broadcast_in_dim(Value x, const Dims& dims, const Dims& broadcast_dims);
// Numpy-style broadcast of `x` to `dims` (trailing dimensions aligned).
Value broadcast_to(Value x, const Dims& dims);
Value slice(Value x, const Dims& start, const Dims& limit, const Dims& strides = {});
Value concatenate(const std::vector<Value>& xs, int64_t dim);
Value pad(Value x, Value pad_value, const Dims& low, const Dims& high, const Dims& interior = {});
Value reverse(Value x, const Dims& dims);
Value dynamic_update_slice(Value x, Value update, const std::vector<Value>& starts);
Value dynamic_slice(Value x, const std::vector<Value>& starts, const Dims& sizes);

// ---- elementwise --------------------------------------------------------
// `op` is the StableHLO op name without prefix ("exponential", "add", ...).
Value unary(const char* op, Value x);
Value binary(const char* op, Value a, Value b);  // same shape and type
Value add(Value a, Value b);
Value sub(Value a, Value b);
Value mul(Value a, Value b);
Value div(Value a, Value b);
Value max(Value a, Value b);
Value min(Value a, Value b);
Value neg(Value x);
// `dir` is EQ, NE, LT, LE, GT or GE; the comparison type follows the
// element type (FLOAT, SIGNED, UNSIGNED).
Value compare(Value a, Value b, const char* dir);
Value select(Value pred, Value on_true, Value on_false);
Value clamp(Value lo, Value x, Value hi);

// ---- reductions and contractions ---------------------------------------
enum class ReduceKind { kSum, kProd, kMax, kMin, kAnd, kOr };
// Reduce `x` over `dims` (result drops them). The init value is the kind's
// identity in x's element type.
Value reduce(Value x, const Dims& dims, ReduceKind kind);
// General reduce with explicit inits and body (e.g. argmax over pairs).
std::vector<Value> reduce_multi(const std::vector<Value>& xs, const std::vector<Value>& inits, const Dims& dims,
                                const RegionBody& body);

struct DotDims {
  Dims lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};
// Result dims: batch dims, then lhs free dims, then rhs free dims.
Value dot_general(Value lhs, Value rhs, const DotDims& dd, ElementType result,
                  const std::string& precision = "DEFAULT");

// ---- indexing -------------------------------------------------------------
struct GatherDims {
  Dims offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims, start_indices_batching_dims;
  int64_t index_vector_dim = 0;
};
Value gather(Value operand, Value indices, const GatherDims& gd, const Dims& slice_sizes, const Dims& result_dims);
struct ScatterDims {
  Dims update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims, input_batching_dims,
      scatter_indices_batching_dims;
  int64_t index_vector_dim = 0;
};
// `combine` is nullptr for plain replacement, else a binary op name ("add",
// "maximum", ...) applied as combine(old, update).
Value scatter(Value operand, Value indices, Value updates, const ScatterDims& sd, const char* combine = nullptr);

// 1-D helpers used for strided views: gather / scatter elements of a 1-D
// operand at an integer index tensor of any shape.
Value gather_1d(Value operand_1d, Value indices);
Value scatter_1d(Value operand_1d, Value indices, Value updates, const char* combine = nullptr);

// ---- sorting and random ---------------------------------------------------
// Sorts along `dim`; the comparator orders by the first operand (ascending
// unless `descending`), NaN last like PyTorch. Returns all operands permuted.
std::vector<Value> sort(const std::vector<Value>& xs, int64_t dim, bool descending, bool stable);
// Returns (new_state, bits) from a tensor<2xui64> key.
std::pair<Value, Value> rng_bit_generator(Value key, const Dims& dims, ElementType bits_type);

// ---- attribute text helpers --------------------------------------------------
std::string dims_attr(const Dims& d);      // "array<i64: 0, 1>"
std::string dims_list(const Dims& d);      // "[0, 1]"

}  // namespace torch_tpu::hlo

// ---- [linalg] loops and dense linear-algebra primitives --------------------
namespace torch_tpu::hlo {
// stablehlo.while over the state `init`: `cond` returns a rank-0 i1 from the
// state, `body` the next state. Both regions get fresh block arguments; they
// must only use those and values they create themselves.
using LoopCond = std::function<Value(const std::vector<Value>&)>;
using LoopBody = std::function<std::vector<Value>(const std::vector<Value>&)>;
std::vector<Value> while_loop(const std::vector<Value>& init, const LoopCond& cond, const LoopBody& body);
// stablehlo.cholesky of [..., n, n] (only the `lower` triangle is read).
Value cholesky(Value a, bool lower);
// stablehlo.triangular_solve: op(a) x = b (left_side) or x op(a) = b; a and b
// have the same batch dims.
Value triangular_solve(Value a, Value b, bool left_side, bool lower, bool unit_diagonal, bool transpose_a);
}  // namespace torch_tpu::hlo

// ---- shape branch: constant index vectors and gathers along one dim ----------
namespace torch_tpu::hlo {
// A 1-D i64 constant holding `values` (non-empty).
Value constant_i64_vector(Builder& b, const Dims& values);
// x with dim `dim` replaced by x[..., idx[k], ...] for each k of the 1-D `idx`.
Value take_along_dim(Value x, int64_t dim, Value idx);
// Adjoint of take_along_dim: `n` entries along `dim`, entry j the sum of
// g[..., k, ...] over every k with idx[k] == j.
Value scatter_add_along_dim(Value g, int64_t dim, Value idx, int64_t n);
}  // namespace torch_tpu::hlo
