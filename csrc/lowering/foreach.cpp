// Foreach ops (_foreach_add/sub/mul/div, addcmul/addcdiv, lerp, sqrt, neg,
// exp, abs, norm): one program for the whole tensor list instead of one per
// tensor. Each rule returns one value per list element; the engine writes
// them back in place (`_foreach_add_`) or returns them as a list. Math is
// per tensor in PyTorch's opmath type (bf16/f16 through f32, rounded once),
// like the per-tensor ops the CPU path runs. Only the overloads registered
// in csrc/aten/foreach.cpp reach these rules (Scalar[] overloads keep
// PyTorch's per-tensor path).
#include <c10/util/Exception.h>

#include <cmath>

#include "lowering/elementwise_util.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

using ew::opmath;

struct Item {
  at::ScalarType out;  // result dtype of this element
  ElementType ct;      // compute type
  Dims dims;           // result shape: the functional forms broadcast (a 0-dim self times a matrix is a matrix)
};

// In-place forms write every element of `self` from the values read before
// the op; list entries that share memory would then lose all but one update.
// Entries of one storage whose element ranges intersect are refused (a
// conservative test: interleaved but disjoint views are refused too).
void check_no_overlap(LowerCtx& ctx, const std::vector<at::Tensor>& self) {
  if (ctx.schema().returns().size() != 0) return;  // functional form: new outputs
  auto range = [](const at::Tensor& t) {
    int64_t lo = t.storage_offset(), hi = lo;
    for (int64_t d = 0; d < t.dim(); ++d) hi += (t.size(d) - 1) * t.stride(d);
    return std::make_pair(lo, t.numel() == 0 ? lo - 1 : hi);
  };
  for (size_t i = 0; i < self.size(); ++i)
    for (size_t j = i + 1; j < self.size(); ++j) {
      if (!self[i].defined() || !self[j].defined() || !self[i].storage().is_alias_of(self[j].storage())) continue;
      auto [a0, a1] = range(self[i]);
      auto [b0, b1] = range(self[j]);
      TORCH_CHECK_NOT_IMPLEMENTED(a1 < b0 || b1 < a0, ctx.op_name(), ": tensors ", i, " and ", j,
                                  " of the list share memory; in-place foreach ops on overlapping tensors are not "
                                  "supported on tpu");
    }
}

Item item(LowerCtx& ctx, const std::vector<at::Tensor>& self, size_t i) {
  if (i == 0) check_no_overlap(ctx, self);
  at::ScalarType out = self[i].scalar_type();
  if (auto d = ctx.out_dtype(static_cast<int>(i))) out = *d;
  Dims dims = self[i].sizes().vec();
  if (auto s = ctx.out_sizes(static_cast<int>(i))) dims = *s;
  return {out, element_type(opmath(out)), dims};
}

// The second operand of element i: a list element, a Scalar or a tensor.
Value second(LowerCtx& ctx, const char* name, const std::vector<Value>& list, size_t i, const Item& it,
             const Dims& dims) {
  if (!list.empty()) return hlo::broadcast_to(hlo::convert(list[i], it.ct), dims);
  return hlo::broadcast_to(hlo::convert(ctx.operand(name, scalar_type(it.ct)), it.ct), dims);
}

using Binary = Value (*)(Value, Value);

std::vector<Value> foreach_binary(LowerCtx& ctx, Binary op, bool has_alpha) {
  auto self_t = ctx.arg("self").toTensorVector();
  auto self = ctx.tensor_list("self");
  bool is_list = ctx.has("other") && ctx.arg("other").isTensorList();
  const char* name = ctx.has("scalar") ? "scalar" : "other";
  std::vector<Value> others = is_list ? ctx.tensor_list("other") : std::vector<Value>{};
  TORCH_CHECK(!is_list || others.size() == self.size(), ctx.op_name(), ": tensor lists must have the same length, got ",
              self.size(), " and ", others.size());
  std::vector<Value> out;
  for (size_t i = 0; i < self.size(); ++i) {
    Item it = item(ctx, self_t, i);
    Value a = hlo::broadcast_to(hlo::convert(self[i], it.ct), it.dims);
    Value b = second(ctx, name, others, i, it, it.dims);
    if (has_alpha && ctx.has("alpha")) b = hlo::mul(b, hlo::broadcast_to(ctx.operand("alpha", scalar_type(it.ct)), a.dims()));
    out.push_back(hlo::convert(op(a, b), element_type(it.out)));
  }
  return out;
}

std::vector<Value> foreach_pointwise(LowerCtx& ctx, bool divide) {
  auto self_t = ctx.arg("self").toTensorVector();
  auto self = ctx.tensor_list("self"), t1 = ctx.tensor_list("tensor1"), t2 = ctx.tensor_list("tensor2");
  TORCH_CHECK(t1.size() == self.size() && t2.size() == self.size(), ctx.op_name(),
              ": tensor lists must have the same length");
  std::vector<Value> out;
  for (size_t i = 0; i < self.size(); ++i) {
    Item it = item(ctx, self_t, i);
    Value a = hlo::broadcast_to(hlo::convert(self[i], it.ct), it.dims);
    Value x = hlo::broadcast_to(hlo::convert(t1[i], it.ct), a.dims());
    Value y = hlo::broadcast_to(hlo::convert(t2[i], it.ct), a.dims());
    Value v = hlo::broadcast_to(ctx.operand("value", scalar_type(it.ct)), a.dims());
    Value q = divide ? hlo::div(x, y) : hlo::mul(x, y);
    out.push_back(hlo::convert(hlo::add(a, hlo::mul(v, q)), element_type(it.out)));
  }
  return out;
}

std::vector<Value> foreach_unary(LowerCtx& ctx, const char* op) {
  auto self_t = ctx.arg("self").toTensorVector();
  auto self = ctx.tensor_list("self");
  std::vector<Value> out;
  for (size_t i = 0; i < self.size(); ++i) {
    Item it = item(ctx, self_t, i);
    out.push_back(hlo::convert(hlo::unary(op, hlo::convert(self[i], it.ct)), element_type(it.out)));
  }
  return out;
}

}  // namespace

TPU_LOWERING(_foreach_add) { return foreach_binary(ctx, hlo::add, true); }
TPU_LOWERING(_foreach_sub) { return foreach_binary(ctx, hlo::sub, true); }
TPU_LOWERING(_foreach_mul) { return foreach_binary(ctx, hlo::mul, false); }
TPU_LOWERING(_foreach_div) { return foreach_binary(ctx, hlo::div, false); }
TPU_LOWERING(_foreach_addcmul) { return foreach_pointwise(ctx, false); }
TPU_LOWERING(_foreach_addcdiv) { return foreach_pointwise(ctx, true); }
TPU_LOWERING(_foreach_sqrt) { return foreach_unary(ctx, "sqrt"); }
TPU_LOWERING(_foreach_neg) { return foreach_unary(ctx, "negate"); }
TPU_LOWERING(_foreach_exp) { return foreach_unary(ctx, "exponential"); }
TPU_LOWERING(_foreach_abs) { return foreach_unary(ctx, "abs"); }

// _foreach_lerp(self, tensors1, weight or weights): self + w * (end - self),
// in opmath like lerp (CPU's lerp formula switches at |w| < 0.5 to keep the
// end exact; so does this).
TPU_LOWERING(_foreach_lerp) {
  auto self_t = ctx.arg("self").toTensorVector();
  auto self = ctx.tensor_list("self"), ends = ctx.tensor_list("tensors1");
  const char* wname = ctx.has("weights") ? "weights" : "weight";
  bool list = ctx.arg(wname).isTensorList();
  std::vector<Value> ws = list ? ctx.tensor_list(wname) : std::vector<Value>{};
  TORCH_CHECK(ends.size() == self.size() && (!list || ws.size() == self.size()), ctx.op_name(),
              ": tensor lists must have the same length");
  std::vector<Value> out;
  for (size_t i = 0; i < self.size(); ++i) {
    Item it = item(ctx, self_t, i);
    Value a = hlo::broadcast_to(hlo::convert(self[i], it.ct), it.dims);
    Value e = hlo::broadcast_to(hlo::convert(ends[i], it.ct), it.dims);
    Value w = second(ctx, wname, ws, i, it, it.dims);
    Value diff = hlo::sub(e, a);
    Value small = hlo::compare(hlo::unary("abs", w), hlo::full_like(w, 0.5), "LT");
    Value lo = hlo::add(a, hlo::mul(w, diff));
    Value hi = hlo::sub(e, hlo::mul(diff, hlo::sub(hlo::full_like(w, 1), w)));
    out.push_back(hlo::convert(hlo::select(small, lo, hi), element_type(it.out)));
  }
  return out;
}

// _foreach_norm.Scalar(self, ord, dtype): one 0-dim vector norm per tensor,
// accumulated in f32 for bf16/f16. `ord` is a runtime operand (a Scalar is
// not part of the program key), so every order is computed and selected,
// as linalg_vector_norm does.
TPU_LOWERING(_foreach_norm) {
  auto self_t = ctx.arg("self").toTensorVector();
  auto self = ctx.tensor_list("self");
  std::vector<Value> out;
  for (size_t i = 0; i < self.size(); ++i) {
    Item it = item(ctx, self_t, i);
    TORCH_CHECK(hlo::is_float(it.ct), ctx.op_name(), ": expected floating-point tensors, got ", self_t[i].scalar_type());
    Value x = hlo::unary("abs", hlo::convert(self[i], it.ct));
    Dims all;
    for (int64_t d = 0; d < x.rank(); ++d) all.push_back(d);
    Value p = hlo::convert(ctx.operand("ord", scalar_type(it.ct)), it.ct);
    auto is_p = [&](double v) { return hlo::compare(p, hlo::constant(ctx.b(), it.ct, v), "EQ"); };
    Value sum1 = hlo::reduce(x, all, hlo::ReduceKind::kSum);
    Value l2 = hlo::unary("sqrt", hlo::reduce(hlo::mul(x, x), all, hlo::ReduceKind::kSum));
    Value general = hlo::binary(
        "power", hlo::reduce(hlo::binary("power", x, hlo::broadcast_in_dim(p, x.dims(), {})), all, hlo::ReduceKind::kSum),
        hlo::div(hlo::constant(ctx.b(), it.ct, 1.0), p));
    Value zeros = hlo::reduce(hlo::convert(hlo::compare(x, hlo::zeros_like(x), "NE"), it.ct), all, hlo::ReduceKind::kSum);
    Value r = hlo::select(is_p(2.0), l2, general);
    r = hlo::select(is_p(1.0), sum1, r);
    r = hlo::select(is_p(0.0), zeros, r);
    r = hlo::select(is_p(INFINITY), hlo::reduce(x, all, hlo::ReduceKind::kMax), r);
    r = hlo::select(is_p(-INFINITY), hlo::reduce(x, all, hlo::ReduceKind::kMin), r);
    out.push_back(hlo::convert(r, element_type(it.out)));
  }
  return out;
}

}  // namespace torch_tpu::lowering
