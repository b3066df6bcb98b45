// Matrix products: mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, vdot.
//
// Each is one stablehlo.dot_general. bf16/f16 products accumulate in f32 and
// are rounded once at the end (what PyTorch's CPU GEMMs do); f32/f64 ask for
// HIGHEST precision so that a TPU does not silently use bf16 passes. Integer
// products accumulate in the integer type (int64 GEMM works on CPU too).
// torch.matmul and nn.functional.linear are composite: they reach these
// rules through mm/bmm/addmm/mv/dot and views.
#include "hlo/complex_ops.h"
#include "lowering/precision.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

ElementType acc_type(at::ScalarType t) {
  if (t == at::kBFloat16 || t == at::kHalf) return ElementType::kF32;
  return element_type(t);
}

at::ScalarType out_type(LowerCtx& ctx, std::initializer_list<std::string_view> inputs) {
  if (auto d = ctx.out_dtype(0)) return *d;
  return ctx.result_type(inputs);
}

void check_supported(LowerCtx& ctx, at::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBool, "\"", ctx.op_name(), "\" not implemented for 'Bool'");
}

// Whether a matrix (or batch of matrices) operand's last dimension, the one
// mm/bmm contract on the lhs, is not its innermost in memory while the
// dimension before it is: a transposed view (unfolded_transposed_lhs).
bool transposed_view(const at::Tensor& t) {
  int64_t r = t.dim();
  if (r < 2 || t.size(r - 1) < 2 || t.size(r - 2) < 2) return false;
  return t.stride(r - 2) == 1 && t.stride(r - 1) != 1;
}

// lhs · rhs in the accumulation type of `out`.
Value product(LowerCtx& ctx, const char* lhs_name, const char* rhs_name, const hlo::DotDims& dd, at::ScalarType out) {
  Value a = ctx.tensor(lhs_name), b = ctx.tensor(rhs_name);
  bool lhs_contracts_last =
      dd.lhs_contract.size() == 1 && dd.lhs_contract[0] == a.rank() - 1 && a.rank() >= 2 && b.rank() >= 2;
  if (lhs_contracts_last) a = unfolded_transposed_lhs(a, transposed_view(ctx.tensor_arg(lhs_name)));
  check_supported(ctx, a.element() == ElementType::kPred ? at::kBool : out);
  ElementType acc = acc_type(out);
  // Mixed input dtypes are an error, as on CPU (the meta kernels do not
  // check this); out_dtype overloads convert both sides.
  TORCH_CHECK(ctx.has("out_dtype") || a.element() == b.element(), "expected m1 and m2 to have the same dtype, but got: ",
              ctx.dtype_of(lhs_name), " != ", ctx.dtype_of(rhs_name));
  if (ctx.has("self") && std::string_view(lhs_name) != "self" && !ctx.has("out_dtype"))
    TORCH_CHECK(ctx.dtype_of("self") == ctx.dtype_of(lhs_name), "self and mat2 must have the same dtype, but got ",
                ctx.dtype_of("self"), " and ", ctx.dtype_of(rhs_name));
  if (a.element() != b.element()) {
    a = hlo::convert(a, acc);
    b = hlo::convert(b, acc);
  }
  return matmul_dot(a, b, dd, acc);
}

// beta * self + alpha * prod, with beta == 0 ignoring self (NaN included),
// as PyTorch does.
Value add_scaled(LowerCtx& ctx, Value prod, at::ScalarType out) {
  ElementType acc = prod.element();
  at::ScalarType acc_st = scalar_type(acc);
  Builder& b = ctx.b();
  const Dims dims = prod.dims();
  if (ctx.has("alpha")) prod = hlo::mul(prod, hlo::broadcast_in_dim(ctx.operand("alpha", acc_st), dims, {}));
  Value self = hlo::broadcast_to(hlo::convert(ctx.tensor("self"), acc), dims);
  if (ctx.has("beta")) {
    Value beta = ctx.operand("beta", acc_st);
    Value zero = hlo::constant(b, acc, 0);
    Value scaled = hlo::mul(self, hlo::broadcast_in_dim(beta, dims, {}));
    Value beta_zero = hlo::compare(beta, zero, "EQ");
    self = hlo::select(beta_zero, hlo::broadcast_in_dim(zero, dims, {}), scaled);
  }
  return hlo::add(self, prod);
}

hlo::DotDims mm_dims() { return {{}, {}, {1}, {0}}; }
hlo::DotDims bmm_dims() { return {{0}, {0}, {2}, {1}}; }

}  // namespace

TPU_LOWERING(mm) { return {product(ctx, "self", "mat2", mm_dims(), out_type(ctx, {"self", "mat2"}))}; }

TPU_LOWERING(bmm) { return {product(ctx, "self", "mat2", bmm_dims(), out_type(ctx, {"self", "mat2"}))}; }

TPU_LOWERING(addmm) {
  auto out = out_type(ctx, {"self", "mat1", "mat2"});
  return {add_scaled(ctx, product(ctx, "mat1", "mat2", mm_dims(), out), out)};
}

TPU_LOWERING(baddbmm) {
  auto out = out_type(ctx, {"self", "batch1", "batch2"});
  return {add_scaled(ctx, product(ctx, "batch1", "batch2", bmm_dims(), out), out)};
}

TPU_LOWERING(addbmm) {
  auto out = out_type(ctx, {"self", "batch1", "batch2"});
  hlo::DotDims dd{{}, {}, {0, 2}, {0, 1}};
  return {add_scaled(ctx, product(ctx, "batch1", "batch2", dd, out), out)};
}

TPU_LOWERING(mv) { return {product(ctx, "self", "vec", mm_dims(), out_type(ctx, {"self", "vec"}))}; }

TPU_LOWERING(addmv) {
  auto out = out_type(ctx, {"self", "mat", "vec"});
  return {add_scaled(ctx, product(ctx, "mat", "vec", mm_dims(), out), out)};
}

TPU_LOWERING(dot) {
  hlo::DotDims dd{{}, {}, {0}, {0}};
  return {product(ctx, "self", "tensor", dd, out_type(ctx, {"self", "tensor"}))};
}
// vdot(self, other) = sum(conj(self) * other): dot of the conjugate (the same
// as dot for real inputs).
TPU_LOWERING(vdot) {
  hlo::DotDims dd{{}, {}, {0}, {0}};
  Value a = ctx.tensor("self"), b = ctx.tensor("other");
  TORCH_CHECK(a.element() == b.element(), "vdot: expected both vectors to have same dtype, but found ",
              ctx.dtype_of("self"), " and ", ctx.dtype_of("other"));
  return {matmul_dot(hlo::conj(a), b, dd, acc_type(out_type(ctx, {"self", "other"})))};
}

}  // namespace torch_tpu::lowering
