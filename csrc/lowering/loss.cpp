// Loss functions (+ backward): binary cross entropy (plain and with
// logits), smooth L1, Huber, soft margin, multi margin, multilabel margin,
// and the masked / safe softmax variants used by attention. Reductions
// follow at::Reduction: 0 none, 1 mean, 2 sum. Half-precision inputs are
// computed in f32 like CPU.
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <cmath>

#include "lowering/compute_util.h"
#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

Dims broadcast_shape(const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Sum or mean of `v` per `reduction` (none returns v).
Value reduce_loss(Builder& b, Value v, int64_t reduction) {
  if (reduction == 0) return v;
  Value s = hlo::reduce(v, range_dims(0, v.rank()), hlo::ReduceKind::kSum);
  if (reduction == 1) s = hlo::div(s, hlo::constant(b, v.element(), static_cast<double>(numel_of(v.dims()))));
  return s;
}

// Elementwise-loss operands (self, target) in the compute type, broadcast to
// their common shape.
struct Pair {
  Value x, t;
  ElementType ce;
  Dims dims;
};

Pair loss_pair(LowerCtx& ctx) {
  Pair p;
  p.ce = acc_type(element_type(ctx.result_type({"self", "target"})));
  Value x = hlo::convert(ctx.tensor("self"), p.ce);
  Value t = hlo::convert(ctx.tensor("target"), p.ce);
  p.dims = broadcast_shape(x.dims(), t.dims());
  p.x = hlo::broadcast_to(x, p.dims);
  p.t = hlo::broadcast_to(t, p.dims);
  return p;
}

// Backward operands: (self, target, grad_output) broadcast to the grad_input
// shape, and the gradient scale for the reduction (1/numel for mean).
struct BackPair {
  Value x, t, g;
  ElementType ce;
  Dims dims;
};

BackPair back_pair(LowerCtx& ctx) {
  BackPair p;
  Value in = ctx.tensor("self");
  p.ce = acc_type(element_type(ctx.result_type({"self", "target"})));
  Value x = hlo::convert(in, p.ce);
  Value t = hlo::convert(ctx.tensor("target"), p.ce);
  Value g = hlo::convert(ctx.tensor("grad_output"), p.ce);
  p.dims = ctx.out_sizes(0).value_or(broadcast_shape(x.dims(), t.dims()));
  p.x = hlo::broadcast_to(x, p.dims);
  p.t = hlo::broadcast_to(t, p.dims);
  int64_t reduction = ctx.int_arg("reduction");
  if (reduction == 1) {
    double n = static_cast<double>(numel_of(in.dims()));
    g = hlo::div(g, hlo::full_like(g, n));
  }
  p.g = reduction == 0 ? hlo::broadcast_to(g, p.dims) : hlo::broadcast_in_dim(hlo::reshape(g, {}), p.dims, {});
  return p;
}

Value full_as(Value like, double v) { return hlo::full_like(like, v); }
Value land(Value a, Value b) { return hlo::binary("and", a, b); }
Value lnot(Value a) { return hlo::unary("not", a); }
Value lor(Value a, Value b) { return hlo::binary("or", a, b); }

}  // namespace

// ---- binary cross entropy ---------------------------------------------------------------

TPU_LOWERING(binary_cross_entropy) {
  Pair p = loss_pair(ctx);
  Builder& b = ctx.b();
  // CPU's check (CUDA's device assert): NaN fails it too
  Value in01 = land(hlo::compare(p.x, full_as(p.x, 0.0), "GE"), hlo::compare(p.x, full_as(p.x, 1.0), "LE"));
  check_data(ctx, lnot(in01), "binary_cross_entropy(): all elements of input should be between 0 and 1");
  // -w * (t * max(log x, -100) + (1 - t) * max(log(1 - x), -100))
  Value lo = full_as(p.x, -100.0);
  Value logx = hlo::max(hlo::unary("log", p.x), lo);
  Value log1mx = hlo::max(hlo::unary("log", hlo::sub(full_as(p.x, 1.0), p.x)), lo);
  Value l = hlo::neg(hlo::add(hlo::mul(p.t, logx), hlo::mul(hlo::sub(full_as(p.t, 1.0), p.t), log1mx)));
  if (ctx.is_tensor("weight")) l = hlo::mul(l, hlo::broadcast_to(hlo::convert(ctx.tensor("weight"), p.ce), p.dims));
  return {reduce_loss(b, l, ctx.int_arg("reduction"))};
}

TPU_LOWERING(binary_cross_entropy_backward) {
  BackPair p = back_pair(ctx);
  // g * (x - t) / max((1 - x) * x, 1e-12) * w
  Value den = hlo::max(hlo::mul(hlo::sub(full_as(p.x, 1.0), p.x), p.x), full_as(p.x, 1e-12));
  Value gi = hlo::div(hlo::mul(p.g, hlo::sub(p.x, p.t)), den);
  if (ctx.is_tensor("weight")) gi = hlo::mul(gi, hlo::broadcast_to(hlo::convert(ctx.tensor("weight"), p.ce), p.dims));
  return {gi};
}

// CPU computes this one as a chain of ATen ops, each rounding to the input
// dtype: `rnd` repeats those roundings for half-precision inputs.
TPU_LOWERING(binary_cross_entropy_with_logits) {
  Pair p = loss_pair(ctx);
  Builder& b = ctx.b();
  ElementType io = element_type(ctx.result_type({"self", "target"}));
  auto rnd = [&](Value v) { return io == p.ce ? v : hlo::convert(hlo::convert(v, io), p.ce); };
  Dims dims = p.dims;
  // Weights may broadcast the result further.
  Value w, pw;
  if (ctx.is_tensor("weight")) {
    w = hlo::convert(ctx.tensor("weight"), p.ce);
    dims = broadcast_shape(dims, w.dims());
  }
  if (ctx.is_tensor("pos_weight")) {
    pw = hlo::convert(ctx.tensor("pos_weight"), p.ce);
    dims = broadcast_shape(dims, pw.dims());
  }
  Value x = hlo::broadcast_to(p.x, dims), t = hlo::broadcast_to(p.t, dims);
  // log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))
  Value ls = rnd(hlo::sub(hlo::min(x, full_as(x, 0.0)),
                          hlo::unary("log_plus_one", hlo::unary("exponential", hlo::neg(hlo::unary("abs", x))))));
  if (pw.valid()) {
    Value lw = rnd(hlo::add(rnd(hlo::mul(rnd(hlo::sub(hlo::broadcast_to(pw, dims), full_as(x, 1.0))), t)),
                            full_as(x, 1.0)));
    ls = rnd(hlo::mul(ls, lw));
  }
  Value l = rnd(hlo::sub(rnd(hlo::mul(rnd(hlo::sub(full_as(t, 1.0), t)), x)), ls));
  if (w.valid()) l = rnd(hlo::mul(l, hlo::broadcast_to(w, dims)));
  return {reduce_loss(b, l, ctx.int_arg("reduction"))};
}

// ---- smooth L1 / Huber -----------------------------------------------------------------------

TPU_LOWERING(smooth_l1_loss) {
  Pair p = loss_pair(ctx);
  double beta = ctx.float_arg("beta");
  Value z = hlo::unary("abs", hlo::sub(p.x, p.t));
  Value l;
  if (beta == 0) {
    l = z;
  } else {
    Value quad = hlo::div(hlo::mul(hlo::mul(z, z), full_as(z, 0.5)), full_as(z, beta));
    l = hlo::select(hlo::compare(z, full_as(z, beta), "LT"), quad, hlo::sub(z, full_as(z, 0.5 * beta)));
  }
  return {reduce_loss(ctx.b(), l, ctx.int_arg("reduction"))};
}

TPU_LOWERING(smooth_l1_loss_backward) {
  BackPair p = back_pair(ctx);
  double beta = ctx.float_arg("beta");
  Value z = hlo::sub(p.x, p.t);
  Value one = full_as(z, 1.0);
  Value d;
  if (beta == 0) {
    d = hlo::unary("sign", z);
  } else {
    Value inner = hlo::div(z, full_as(z, beta));
    d = hlo::select(hlo::compare(z, full_as(z, -beta), "LE"), hlo::neg(one),
                    hlo::select(hlo::compare(z, full_as(z, beta), "GE"), one, inner));
  }
  return {hlo::mul(d, p.g)};
}

TPU_LOWERING(huber_loss) {
  Pair p = loss_pair(ctx);
  double delta = ctx.float_arg("delta");
  Value z = hlo::unary("abs", hlo::sub(p.x, p.t));
  Value quad = hlo::mul(hlo::mul(z, z), full_as(z, 0.5));
  Value lin = hlo::mul(full_as(z, delta), hlo::sub(z, full_as(z, 0.5 * delta)));
  Value l = hlo::select(hlo::compare(z, full_as(z, delta), "LT"), quad, lin);
  return {reduce_loss(ctx.b(), l, ctx.int_arg("reduction"))};
}

TPU_LOWERING(huber_loss_backward) {
  BackPair p = back_pair(ctx);
  double delta = ctx.float_arg("delta");
  Value z = hlo::sub(p.x, p.t);
  Value dl = full_as(z, delta);
  Value d = hlo::select(hlo::compare(z, hlo::neg(dl), "LT"), hlo::neg(dl),
                        hlo::select(hlo::compare(z, dl, "GT"), dl, z));
  return {hlo::mul(d, p.g)};
}

// ---- soft margin -------------------------------------------------------------------------------

// log1p(exp(-x * t)), rounded after each op like CPU's composite.
TPU_LOWERING(soft_margin_loss) {
  Pair p = loss_pair(ctx);
  ElementType io = element_type(ctx.result_type({"self", "target"}));
  auto rnd = [&](Value v) { return io == p.ce ? v : hlo::convert(hlo::convert(v, io), p.ce); };
  Value l = hlo::unary("log_plus_one", rnd(hlo::unary("exponential", rnd(hlo::neg(hlo::mul(p.x, p.t))))));
  return {reduce_loss(ctx.b(), l, ctx.int_arg("reduction"))};
}

TPU_LOWERING(soft_margin_loss_backward) {
  BackPair p = back_pair(ctx);
  // -t * z / (1 + z) * g with z = exp(-t * x)
  Value z = hlo::unary("exponential", hlo::neg(hlo::mul(p.t, p.x)));
  Value d = hlo::div(hlo::mul(hlo::neg(p.t), z), hlo::add(full_as(z, 1.0), z));
  return {hlo::mul(d, p.g)};
}

// ---- multi margin ---------------------------------------------------------------------------------

namespace {

// The margin losses see their input as [N, C] rows (a 1-D input is one row,
// a 0-d one a single class) and accumulate in acc_type.
struct LossRows {
  ElementType ce;
  int64_t n = 1, c = 1;
  bool one_d = false;
  void set_rows(const Value& in) {
    ce = acc_type(in.element());
    one_d = in.rank() <= 1;
    c = in.rank() == 0 ? 1 : in.dims().back();
    n = in.rank() <= 1 ? 1 : in.dim(0);
  }
};

// Per-sample hinge terms of multi_margin_loss for a [N, C] input:
// z[i, d] = margin - x[i, y_i] + x[i, d] (0 on d == y_i), the class weight
// of y_i, and the one-hot of y_i.
struct MultiMargin : LossRows {
  Value x, z, pos, onehot, wy, is_p1;
};

MultiMargin multi_margin(LowerCtx& ctx) {
  MultiMargin m;
  Value in = ctx.tensor("self");
  m.set_rows(in);
  Builder& b = ctx.b();
  Dims nc{m.n, m.c};
  m.x = hlo::reshape(hlo::convert(in, m.ce), nc);
  Value t = hlo::reshape(hlo::convert(ctx.tensor("target"), ElementType::kI64), {m.n});
  Value bad_t = lor(hlo::compare(t, hlo::full_like(t, 0), "LT"), hlo::compare(t, hlo::full_like(t, static_cast<double>(m.c)), "GE"));
  check_data(ctx, bad_t, "multi_margin_loss(): target out of range (target {}, " + std::to_string(m.c) + " classes)", t);
  m.onehot = hlo::compare(hlo::iota(b, ElementType::kI64, nc, 1), hlo::broadcast_in_dim(t, nc, {0}), "EQ");
  Value zero = hlo::full(b, m.ce, nc, 0);
  Value xy = hlo::reduce(hlo::select(m.onehot, m.x, zero), {1}, hlo::ReduceKind::kSum);  // [n]
  Value margin = hlo::broadcast_in_dim(ctx.operand("margin", at::kDouble), nc, {});
  margin = hlo::convert(margin, m.ce);
  Value z = hlo::add(hlo::sub(margin, hlo::broadcast_in_dim(xy, nc, {0})), m.x);
  m.pos = land(hlo::compare(z, zero, "GT"), lnot(m.onehot));
  m.z = z;
  if (ctx.is_tensor("weight")) {
    Value w = hlo::broadcast_in_dim(hlo::reshape(hlo::convert(ctx.tensor("weight"), m.ce), {m.c}), nc, {1});
    m.wy = hlo::reduce(hlo::select(m.onehot, w, zero), {1}, hlo::ReduceKind::kSum);
  }
  Value p = hlo::convert(ctx.operand("p", at::kDouble), m.ce);
  m.is_p1 = hlo::compare(p, hlo::constant(b, m.ce, 1.0), "EQ");
  return m;
}

}  // namespace

TPU_LOWERING(multi_margin_loss) {
  MultiMargin m = multi_margin(ctx);
  Builder& b = ctx.b();
  Dims nc{m.n, m.c};
  Value zero = hlo::full(b, m.ce, nc, 0);
  Value h = hlo::select(hlo::broadcast_in_dim(m.is_p1, nc, {}), m.z, hlo::mul(m.z, m.z));
  h = hlo::select(m.pos, h, zero);
  Value per = hlo::div(hlo::reduce(h, {1}, hlo::ReduceKind::kSum), hlo::full(b, m.ce, {m.n}, static_cast<double>(m.c)));
  if (m.wy.valid()) per = hlo::mul(per, m.wy);
  int64_t reduction = ctx.int_arg("reduction");
  // One sample: CPU's result is 0-d for a 0-d target, [1] for a [1] one.
  if (reduction == 0) return {ctx.tensor_arg("target").dim() == 0 ? hlo::reshape(per, {}) : per};
  return {reduce_loss(b, per, reduction)};
}

TPU_LOWERING(multi_margin_loss_backward) {
  MultiMargin m = multi_margin(ctx);
  Builder& b = ctx.b();
  Dims nc{m.n, m.c};
  Value zero = hlo::full(b, m.ce, nc, 0);
  int64_t reduction = ctx.int_arg("reduction");
  double g = reduction == 1 ? 1.0 / static_cast<double>(m.n * m.c) : 1.0 / static_cast<double>(m.c);
  Value gv = hlo::full(b, m.ce, nc, g);
  Value h = hlo::select(hlo::broadcast_in_dim(m.is_p1, nc, {}), gv, hlo::mul(hlo::mul(gv, m.z), hlo::full(b, m.ce, nc, 2.0)));
  h = hlo::select(m.pos, h, zero);
  if (m.wy.valid()) h = hlo::mul(h, hlo::broadcast_in_dim(m.wy, nc, {0}));
  Value sum_h = hlo::broadcast_in_dim(hlo::reduce(h, {1}, hlo::ReduceKind::kSum), nc, {0});
  Value gi = hlo::select(m.onehot, hlo::neg(sum_h), h);
  Value go = hlo::convert(ctx.tensor("grad_output"), m.ce);
  Value gob = reduction == 0 ? hlo::broadcast_in_dim(hlo::reshape(go, {m.n}), nc, {0})
                             : hlo::broadcast_in_dim(hlo::reshape(go, {}), nc, {});
  return {hlo::mul(gi, gob)};
}

// ---- multilabel margin ----------------------------------------------------------------------------

namespace {

// Targets are class indices terminated by the first -1. For input [N, C]:
// valid[i, j] (target slot j counts), tmatch[i, j, c] (slot j names class
// c), is_target[i, c], hinge positivity pos[i, j, k].
struct MultiLabel : LossRows {
  Value x, valid, tmatch, is_target, pos;
};

MultiLabel multilabel(LowerCtx& ctx) {
  MultiLabel m;
  Value in = ctx.tensor("self");
  m.set_rows(in);
  Builder& b = ctx.b();
  int64_t n = m.n, c = m.c;
  Dims nc{n, c}, ncc{n, c, c};
  m.x = hlo::reshape(hlo::convert(in, m.ce), nc);
  Value t = hlo::reshape(hlo::convert(ctx.tensor("target"), ElementType::kI64), nc);
  Value bad_t = lor(hlo::compare(t, hlo::full_like(t, -1), "LT"), hlo::compare(t, hlo::full_like(t, static_cast<double>(c)), "GE"));
  check_data(ctx, bad_t, "multilabel_margin_loss(): argument #2 'target' is out of range (target {}, " + std::to_string(c) + " classes)", t);
  Value j = hlo::iota(b, ElementType::kI64, nc, 1);
  Value neg1 = hlo::compare(t, hlo::full(b, ElementType::kI64, nc, -1), "EQ");
  Value first = hlo::reduce(hlo::select(neg1, j, hlo::full(b, ElementType::kI64, nc, static_cast<double>(c))), {1},
                            hlo::ReduceKind::kMin);
  m.valid = hlo::compare(j, hlo::broadcast_in_dim(first, nc, {0}), "LT");
  Value cls = hlo::iota(b, ElementType::kI64, ncc, 2);
  m.tmatch = land(hlo::compare(hlo::broadcast_in_dim(t, ncc, {0, 1}), cls, "EQ"),
                       hlo::broadcast_in_dim(m.valid, ncc, {0, 1}));
  m.is_target = hlo::reduce(m.tmatch, {1}, hlo::ReduceKind::kOr);  // [n, c]
  Value zero3 = hlo::full(b, m.ce, ncc, 0);
  Value xt = hlo::reduce(hlo::select(m.tmatch, hlo::broadcast_in_dim(m.x, ncc, {0, 2}), zero3), {2},
                         hlo::ReduceKind::kSum);  // [n, j]
  // z[i, j, k] = 1 - x[t_j] + x[k]
  Value z = hlo::add(hlo::sub(hlo::full(b, m.ce, ncc, 1.0), hlo::broadcast_in_dim(xt, ncc, {0, 1})),
                     hlo::broadcast_in_dim(m.x, ncc, {0, 2}));
  m.pos = land(land(hlo::compare(z, zero3, "GT"), hlo::broadcast_in_dim(m.valid, ncc, {0, 1})),
                    lnot(hlo::broadcast_in_dim(m.is_target, ncc, {0, 2})));
  m.x = z;  // keep z for the forward
  return m;
}

}  // namespace

TPU_LOWERING(multilabel_margin_loss_forward) {
  MultiLabel m = multilabel(ctx);
  Builder& b = ctx.b();
  Dims ncc{m.n, m.c, m.c};
  Value h = hlo::select(m.pos, m.x, hlo::full(b, m.ce, ncc, 0));
  Value per = hlo::div(hlo::reduce(h, {1, 2}, hlo::ReduceKind::kSum),
                       hlo::full(b, m.ce, {m.n}, static_cast<double>(m.c)));
  int64_t reduction = ctx.int_arg("reduction");
  Value out = reduction == 0 ? (m.one_d ? hlo::reshape(per, {}) : per) : reduce_loss(b, per, reduction);
  return {out, hlo::convert(m.is_target, m.ce)};
}

TPU_LOWERING(multilabel_margin_loss_backward) {
  MultiLabel m = multilabel(ctx);
  Builder& b = ctx.b();
  Dims nc{m.n, m.c}, ncc{m.n, m.c, m.c};
  int64_t reduction = ctx.int_arg("reduction");
  double g = reduction == 1 ? 1.0 / static_cast<double>(m.n * m.c) : 1.0 / static_cast<double>(m.c);
  Value posf = hlo::convert(m.pos, m.ce);
  // + g on each non-target k per positive (j, k); - g on class t_j per one.
  Value plus = hlo::reduce(posf, {1}, hlo::ReduceKind::kSum);              // [n, k]
  Value per_j = hlo::reduce(posf, {2}, hlo::ReduceKind::kSum);             // [n, j]
  Value minus = hlo::reduce(hlo::mul(hlo::convert(m.tmatch, m.ce), hlo::broadcast_in_dim(per_j, ncc, {0, 1})), {1},
                            hlo::ReduceKind::kSum);  // [n, c]
  Value gi = hlo::mul(hlo::sub(plus, minus), hlo::full(b, m.ce, nc, g));
  Value go = hlo::convert(ctx.tensor("grad_output"), m.ce);
  Value gob = reduction == 0 ? hlo::broadcast_in_dim(hlo::reshape(go, {m.n}), nc, {0})
                             : hlo::broadcast_in_dim(hlo::reshape(go, {}), nc, {});
  return {hlo::mul(gi, gob)};
}

// ---- CTC loss -------------------------------------------------------------------------------------

namespace {

// A [n] vector of per-sample constants.
Value const_vec(Builder& b, ElementType e, const std::vector<int64_t>& v) {
  std::vector<Value> parts;
  for (auto x : v) parts.push_back(hlo::reshape(hlo::constant(b, e, static_cast<double>(x)), {1}));
  if (parts.empty()) return hlo::full(b, e, {0}, 0);
  return parts.size() == 1 ? parts[0] : hlo::concatenate(parts, 0);
}

// Shift x [n, l] right (left) by k along dim 1, filling with `fill`.
Value shift_right(Value x, int64_t k, double fill) {
  int64_t n = x.dim(0), l = x.dim(1);
  if (k >= l) return hlo::full_like(x, fill);
  Value body = hlo::slice(x, {0, 0}, {n, l - k});
  return hlo::pad(body, hlo::constant(x.builder(), x.element(), fill), {0, k}, {0, 0});
}
Value shift_left(Value x, int64_t k, double fill) {
  int64_t n = x.dim(0), l = x.dim(1);
  if (k >= l) return hlo::full_like(x, fill);
  Value body = hlo::slice(x, {0, k}, {n, l});
  return hlo::pad(body, hlo::constant(x.builder(), x.element(), fill), {0, 0}, {0, k});
}

// log(exp(a) + exp(b) + exp(c)) like CPU (a max of -inf counts as 0).
Value lse3(Value a, Value b, Value c) {
  Value m = hlo::max(hlo::max(a, b), c);
  Value ninf = hlo::full_like(m, -INFINITY);
  m = hlo::select(hlo::compare(m, ninf, "EQ"), hlo::full_like(m, 0.0), m);
  auto e = [&](Value v) { return hlo::unary("exponential", hlo::sub(v, m)); };
  return hlo::add(hlo::unary("log", hlo::add(hlo::add(e(a), e(b)), e(c))), m);
}

struct Ctc {
  ElementType ce;
  int64_t t, n, c, l;  // time, batch, classes, extended target length
  bool batched;
  std::vector<int64_t> il, tl;
  Value lp;        // [t, n, c]
  Value lpe;       // [t, n, l]: log prob of the extended label at each step
  Value lprime;    // [n, l] i64
  Value valid_s;   // [n, l] i1: s < 2 * tl + 1
  Value skip;      // [n, l] i1: the s-2 -> s transition is allowed
  Value onehot;    // [n, l, c] i1
  Value il_b;      // [n, l] i64: input length of each sample
};

Ctc ctc_setup(LowerCtx& ctx) {
  TORCH_CHECK_NOT_IMPLEMENTED(ctx.arg("input_lengths").isIntList(), ctx.op_name(),
                              ": only int[] lengths are lowered (ctc_loss passes tensors as lists)");
  Ctc k;
  Builder& b = ctx.b();
  Value lp0 = ctx.tensor("log_probs");
  k.ce = acc_type(lp0.element());
  k.batched = lp0.rank() == 3;
  k.t = lp0.dim(0);
  k.c = lp0.dims().back();
  k.n = k.batched ? lp0.dim(1) : 1;
  k.lp = hlo::reshape(hlo::convert(lp0, k.ce), {k.t, k.n, k.c});
  k.il = ctx.ints_arg("input_lengths");
  k.tl = ctx.ints_arg("target_lengths");
  int64_t blank = ctx.int_arg("blank");
  int64_t s_max = 0;
  for (auto v : k.tl) s_max = std::max(s_max, v);
  k.l = 2 * s_max + 1;
  Dims nl{k.n, k.l};
  Value tg = ctx.tensor("targets");
  int64_t tnum = tg.type().numel();
  Value flat = hlo::reshape(hlo::convert(tg, ElementType::kI64), {tnum});
  // Flat index of target (s - 1) / 2 of sample i.
  Value s_iota = hlo::iota(b, ElementType::kI64, nl, 1);
  Value kk = hlo::div(hlo::max(hlo::sub(s_iota, hlo::full(b, ElementType::kI64, nl, 1)),
                               hlo::full(b, ElementType::kI64, nl, 0)),
                      hlo::full(b, ElementType::kI64, nl, 2));
  Value base;
  if (tg.rank() == 2) {
    Value n_iota = hlo::iota(b, ElementType::kI64, nl, 0);
    base = hlo::mul(n_iota, hlo::full(b, ElementType::kI64, nl, static_cast<double>(tg.dim(1))));
  } else {
    std::vector<int64_t> off(k.n, 0);
    for (int64_t i = 1; i < k.n; ++i) off[i] = off[i - 1] + k.tl[i - 1];
    base = hlo::broadcast_in_dim(const_vec(b, ElementType::kI64, off), nl, {0});
  }
  Value valid_t = hlo::compare(s_iota, hlo::broadcast_in_dim(hlo::add(hlo::mul(const_vec(b, ElementType::kI64, k.tl),
                                                                                 hlo::full(b, ElementType::kI64, {k.n}, 2)),
                                                                       hlo::full(b, ElementType::kI64, {k.n}, 1)),
                                                             nl, {0}),
                               "LT");
  k.valid_s = valid_t;
  Value odd = hlo::compare(hlo::binary("remainder", s_iota, hlo::full(b, ElementType::kI64, nl, 2)), hlo::full(b, ElementType::kI64, nl, 1), "EQ");
  Value use = hlo::binary("and", odd, valid_t);
  Value idx = hlo::add(base, kk);
  idx = hlo::select(use, idx, hlo::full(b, ElementType::kI64, nl, 0));
  Value picked = tnum > 0 ? hlo::gather_1d(flat, idx) : hlo::full(b, ElementType::kI64, nl, 0);
  k.lprime = hlo::select(use, picked, hlo::full(b, ElementType::kI64, nl, static_cast<double>(blank)));
  Value prev2 = shift_right(k.lprime, 2, -1);
  k.skip = hlo::binary("and", hlo::binary("and", odd, hlo::compare(k.lprime, prev2, "NE")),
                       hlo::compare(s_iota, hlo::full(b, ElementType::kI64, nl, 2), "GE"));
  Dims nlc{k.n, k.l, k.c};
  k.onehot = hlo::compare(hlo::broadcast_in_dim(k.lprime, nlc, {0, 1}), hlo::iota(b, ElementType::kI64, nlc, 2), "EQ");
  // lpe[t, n, s] = lp[t, n, l'[n, s]], a gather on the flattened log probs.
  Dims tnl{k.t, k.n, k.l};
  auto i64 = [&](double v) { return hlo::full(b, ElementType::kI64, tnl, v); };
  Value fidx = hlo::add(hlo::add(hlo::mul(hlo::iota(b, ElementType::kI64, tnl, 0), i64(static_cast<double>(k.n * k.c))),
                                 hlo::mul(hlo::iota(b, ElementType::kI64, tnl, 1), i64(static_cast<double>(k.c)))),
                        hlo::broadcast_in_dim(k.lprime, tnl, {1, 2}));
  k.lpe = k.t * k.n * k.c > 0 ? hlo::gather_1d(hlo::reshape(k.lp, {k.t * k.n * k.c}), fidx)
                              : hlo::full(b, k.ce, tnl, -INFINITY);
  k.il_b = hlo::broadcast_in_dim(const_vec(b, ElementType::kI64, k.il), nl, {0});
  return k;
}

Value ci64(Builder& b, int64_t v) { return hlo::constant_int(b, ElementType::kI64, v); }

Value step_lpe(const Ctc& k, int64_t t) {
  return hlo::reshape(hlo::slice(k.lpe, {t, 0, 0}, {t + 1, k.n, k.l}), {k.n, k.l});
}

// nll per sample [n] from the final alphas (taken at t = il - 1) [n, l].
Value ctc_nll(Builder& b, const Ctc& k, Value alpha_last) {
  Dims nl{k.n, k.l};
  std::vector<int64_t> hi(k.n), lo(k.n);
  for (int64_t i = 0; i < k.n; ++i) {
    hi[i] = 2 * k.tl[i];
    lo[i] = k.tl[i] == 0 ? 0 : 2 * k.tl[i] - 1;
  }
  Value s_iota = hlo::iota(b, ElementType::kI64, nl, 1);
  auto at = [&](const std::vector<int64_t>& pos) {
    Value m = hlo::compare(s_iota, hlo::broadcast_in_dim(const_vec(b, ElementType::kI64, pos), nl, {0}), "EQ");
    return hlo::reduce(hlo::select(m, alpha_last, hlo::full(b, k.ce, nl, -INFINITY)), {1}, hlo::ReduceKind::kMax);
  };
  Value l1 = at(hi), l2 = at(lo);
  std::vector<int64_t> empty_t(k.n), zero_in(k.n);
  for (int64_t i = 0; i < k.n; ++i) {
    empty_t[i] = k.tl[i] == 0;
    zero_in[i] = k.il[i] == 0;
  }
  Value ninf = hlo::full(b, k.ce, {k.n}, -INFINITY);
  Value ll = lse3(l1, l2, ninf);
  ll = hlo::select(hlo::convert(const_vec(b, ElementType::kI64, empty_t), ElementType::kPred), l1, ll);
  // No input: likelihood 1 for an empty target, else 0.
  Value ll0 = hlo::select(hlo::convert(const_vec(b, ElementType::kI64, empty_t), ElementType::kPred),
                          hlo::full(b, k.ce, {k.n}, 0), ninf);
  ll = hlo::select(hlo::convert(const_vec(b, ElementType::kI64, zero_in), ElementType::kPred), ll0, ll);
  return hlo::neg(ll);
}

}  // namespace

// (neg_log_likelihood [n], log_alpha [n, t, l]). The time recursion is a
// stablehlo.while, so the program does not grow with the sequence length.
TPU_LOWERING(_ctc_loss) {
  Builder& b = ctx.b();
  Ctc k = ctc_setup(ctx);
  Dims nl{k.n, k.l};
  Value ninf = hlo::full(b, k.ce, nl, -INFINITY);
  if (k.t == 0) {
    Value nll = hlo::full(b, k.ce, {k.n}, 0);
    Value la = hlo::full(b, k.ce, {k.n, 0, k.l}, 0);
    return {k.batched ? nll : hlo::reshape(nll, {}), k.batched ? la : hlo::reshape(la, {0, k.l})};
  }
  Value s_iota = hlo::iota(b, ElementType::kI64, nl, 1);
  Value first = hlo::compare(s_iota, hlo::full(b, ElementType::kI64, nl, 1), "LE");
  Value alpha0 = hlo::select(hlo::binary("and", first, k.valid_s), step_lpe(k, 0), ninf);
  Value la0 = hlo::dynamic_update_slice(hlo::full(b, k.ce, {k.n, k.t, k.l}, -INFINITY), hlo::reshape(alpha0, {k.n, 1, k.l}),
                                        {ci64(b, 0), ci64(b, 0), ci64(b, 0)});
  // State: t, alpha, alpha at t = il - 1, log_alpha, then loop constants.
  auto out = hlo::while_loop(
      {ci64(b, 1), alpha0, alpha0, la0, k.lpe, k.skip, k.valid_s, k.il_b},
      [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci64(b, k.t), "LT"); },
      [&](const std::vector<Value>& s) {
        Value t = s[0], alpha = s[1], last = s[2], la = s[3], lpe = s[4], skip = s[5], valid = s[6], il = s[7];
        Value z = ci64(b, 0);
        Value nf = hlo::full(b, k.ce, nl, -INFINITY);
        Value lpt = hlo::reshape(hlo::dynamic_slice(lpe, {t, z, z}, {1, k.n, k.l}), nl);
        Value a2 = shift_right(alpha, 1, -INFINITY);
        Value a3 = hlo::select(skip, shift_right(alpha, 2, -INFINITY), nf);
        Value next = hlo::select(valid, hlo::add(lse3(alpha, a2, a3), lpt), nf);
        Value live = hlo::compare(il, hlo::broadcast_in_dim(t, nl, {}), "GT");
        la = hlo::dynamic_update_slice(la, hlo::reshape(next, {k.n, 1, k.l}), {z, t, z});
        return std::vector<Value>{hlo::add(t, ci64(b, 1)), next, hlo::select(live, next, last), la, lpe, skip, valid, il};
      });
  Value nll = ctc_nll(b, k, out[2]);
  if (!k.batched) nll = hlo::reshape(nll, {});
  return {nll, k.batched ? out[3] : hlo::reshape(out[3], {k.t, k.l})};
}

TPU_LOWERING(_ctc_loss_backward) {
  Builder& b = ctx.b();
  Ctc k = ctc_setup(ctx);
  Dims nl{k.n, k.l}, tnl{k.t, k.n, k.l};
  Value ninf = hlo::full(b, k.ce, nl, -INFINITY);
  Value la = hlo::reshape(hlo::convert(ctx.tensor("log_alpha"), k.ce), {k.n, k.t, k.l});
  Value nll = hlo::reshape(hlo::convert(ctx.tensor("neg_log_likelihood"), k.ce), {k.n});
  Value gr = hlo::reshape(hlo::convert(ctx.tensor("grad"), k.ce), {k.n});
  // Beta recursion from t = il - 1 down to 0.
  Value s_iota = hlo::iota(b, ElementType::kI64, nl, 1);
  std::vector<int64_t> hi(k.n), lo(k.n);
  for (int64_t i = 0; i < k.n; ++i) {
    hi[i] = 2 * k.tl[i];
    lo[i] = k.tl[i] == 0 ? 2 * k.tl[i] : 2 * k.tl[i] - 1;
  }
  Value init_pos = hlo::binary(
      "or", hlo::compare(s_iota, hlo::broadcast_in_dim(const_vec(b, ElementType::kI64, hi), nl, {0}), "EQ"),
      hlo::compare(s_iota, hlo::broadcast_in_dim(const_vec(b, ElementType::kI64, lo), nl, {0}), "EQ"));
  // skip_next[s]: the s+2 -> s transition of the beta recursion.
  Value skip_next = hlo::convert(shift_left(hlo::convert(k.skip, ElementType::kI64), 2, 0), ElementType::kPred);
  // State: t + 1 (counting down), beta, all betas [t, n, l], then loop constants.
  Value lb = hlo::full(b, k.ce, tnl, -INFINITY);
  if (k.t > 0) {
    auto out = hlo::while_loop(
        {ci64(b, k.t), ninf, lb, k.lpe, skip_next, k.valid_s, k.il_b, init_pos},
        [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci64(b, 0), "GT"); },
        [&](const std::vector<Value>& s) {
          Value t1 = s[0], beta = s[1], betas = s[2], lpe = s[3], skip = s[4], valid = s[5], il = s[6], ipos = s[7];
          Value z = ci64(b, 0), t = hlo::sub(t1, ci64(b, 1));
          Value nf = hlo::full(b, k.ce, nl, -INFINITY);
          Value lpt = hlo::reshape(hlo::dynamic_slice(lpe, {t, z, z}, {1, k.n, k.l}), nl);
          Value last_m = hlo::compare(il, hlo::broadcast_in_dim(t1, nl, {}), "EQ");
          Value live = hlo::compare(il, hlo::broadcast_in_dim(t, nl, {}), "GT");
          Value b2 = shift_left(beta, 1, -INFINITY);
          Value b3 = hlo::select(skip, shift_left(beta, 2, -INFINITY), nf);
          Value rec = hlo::add(lse3(beta, b2, b3), lpt);
          Value next = hlo::select(last_m, hlo::select(ipos, lpt, nf), hlo::select(live, rec, nf));
          next = hlo::select(valid, next, nf);
          betas = hlo::dynamic_update_slice(betas, hlo::reshape(next, {1, k.n, k.l}), {t, z, z});
          return std::vector<Value>{t, next, betas, lpe, skip, valid, il, ipos};
        });
    lb = out[2];
  }
  Dims tnlc{k.t, k.n, k.l, k.c}, tnc{k.t, k.n, k.c};
  Value lat = hlo::transpose(la, {1, 0, 2});  // [t, n, l]
  Value tmask = hlo::compare(hlo::broadcast_in_dim(k.il_b, tnl, {1, 2}), hlo::iota(b, ElementType::kI64, tnl, 0), "GT");
  // grad[t, n, c] = exp(lp) - exp(logsumexp_{s: l'_s = c}(alpha + beta) + nll - lp), times grad.
  Value vmask = hlo::binary("and", tmask, hlo::broadcast_in_dim(k.valid_s, {k.t, k.n, k.l}, {1, 2}));
  Value ab = hlo::select(vmask, hlo::add(lat, lb), hlo::full(b, k.ce, {k.t, k.n, k.l}, -INFINITY));
  Value oh = hlo::broadcast_in_dim(k.onehot, tnlc, {1, 2, 3});
  Value abc = hlo::select(oh, hlo::broadcast_in_dim(ab, tnlc, {0, 1, 2}), hlo::full(b, k.ce, tnlc, -INFINITY));
  Value mx = hlo::reduce(abc, {2}, hlo::ReduceKind::kMax);  // [t, n, c]
  Value mx0 = hlo::select(hlo::compare(mx, hlo::full(b, k.ce, tnc, -INFINITY), "EQ"), hlo::full(b, k.ce, tnc, 0), mx);
  Value sum = hlo::reduce(hlo::unary("exponential", hlo::sub(abc, hlo::broadcast_in_dim(mx0, tnlc, {0, 1, 3}))), {2},
                          hlo::ReduceKind::kSum);
  Value lcab = hlo::add(hlo::unary("log", sum), mx0);
  Value nllb = hlo::broadcast_in_dim(nll, tnc, {1});
  Value g = hlo::sub(hlo::unary("exponential", k.lp),
                     hlo::unary("exponential", hlo::sub(hlo::add(lcab, nllb), k.lp)));
  g = hlo::mul(g, hlo::broadcast_in_dim(gr, tnc, {1}));
  Value tm = hlo::slice(tmask, {0, 0, 0}, {k.t, k.n, 1});
  Value tmc = hlo::broadcast_in_dim(hlo::reshape(tm, {k.t, k.n}), tnc, {0, 1});
  Value zero = hlo::full(b, k.ce, tnc, 0);
  g = hlo::select(tmc, g, zero);
  if (ctx.bool_arg("zero_infinity")) {
    Value inf_n = hlo::compare(nll, hlo::full(b, k.ce, {k.n}, INFINITY), "EQ");
    g = hlo::select(hlo::broadcast_in_dim(inf_n, tnc, {1}), zero, g);
  }
  if (!k.batched) g = hlo::reshape(g, {k.t, k.c});
  return {g};
}

// ---- safe / masked softmax ---------------------------------------------------------------------

namespace {

// softmax of x along dim with `masked` (i1, x's shape) entries excluded;
// fully masked slices give 0.
Value masked_softmax_impl(Value x, Value masked, int64_t dim) {
  Value ninf = full_as(x, -INFINITY);
  Value xm = hlo::select(masked, ninf, x);
  Dims keep;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != dim) keep.push_back(i);
  auto bc = [&](Value r) { return hlo::broadcast_in_dim(r, x.dims(), keep); };
  Value mx = bc(hlo::reduce(xm, {dim}, hlo::ReduceKind::kMax));
  // Fully masked slices give nan like CPU (-inf - -inf).
  Value e = hlo::unary("exponential", hlo::sub(xm, mx));
  Value s = bc(hlo::reduce(e, {dim}, hlo::ReduceKind::kSum));
  return hlo::div(e, s);
}

}  // namespace

// softmax where slices that are entirely -inf give 0 instead of nan.
TPU_LOWERING(_safe_softmax) {
  Value in = ctx.tensor("self");
  Dims orig = in.dims();
  ElementType oe = ctx.out_dtype(0) ? element_type(*ctx.out_dtype(0)) : in.element();
  Value x = hlo::convert(in, acc_type(oe));
  if (x.rank() == 0) x = hlo::reshape(x, {1});
  int64_t dim = c10::maybe_wrap_dim(ctx.int_arg("dim"), static_cast<int64_t>(orig.size()));
  Dims keep;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != dim) keep.push_back(i);
  // Plain softmax (nan propagates as on CPU), zeroed where the whole slice
  // is -inf: where its max is -inf (a nan makes the max nan, as it makes
  // "all -inf" false), so no reduction of its own.
  Value mx = hlo::broadcast_in_dim(hlo::reduce(x, {dim}, hlo::ReduceKind::kMax), x.dims(), keep);
  Value all = hlo::compare(mx, full_as(mx, -INFINITY), "EQ");
  Value e = hlo::unary("exponential", hlo::sub(x, mx));
  Value y = hlo::div(e, hlo::broadcast_in_dim(hlo::reduce(e, {dim}, hlo::ReduceKind::kSum), x.dims(), keep));
  y = hlo::select(all, full_as(y, 0.0), y);
  return {hlo::reshape(y, orig)};
}

namespace {

// The boolean mask of _masked_softmax expanded to the input's shape
// (mask_type 1: a [B, L] key padding mask for a [B, H, L, L] input).
Value expand_mask(LowerCtx& ctx, Value mask, const Dims& dims) {
  Value m = hlo::convert(mask, ElementType::kPred);
  auto mt = ctx.has("mask_type") ? ctx.opt_int("mask_type") : std::nullopt;
  if (mt && *mt == 1 && dims.size() == 4 && m.rank() == 2) return hlo::broadcast_in_dim(m, dims, {0, 3});
  return hlo::broadcast_to(m, dims);
}

}  // namespace

TPU_LOWERING(_masked_softmax) {
  Value in = ctx.tensor("self");
  ElementType ce = acc_type(in.element());
  Value x = hlo::convert(in, ce);
  int64_t dim = c10::maybe_wrap_dim(ctx.opt_int("dim").value_or(-1), x.rank());
  Value mask = expand_mask(ctx, ctx.tensor("mask"), x.dims());
  // Computed in f32, returned in the input's dtype as CPU does (the op has
  // no meta kernel: the result's element type is the output's dtype).
  return {hlo::convert(masked_softmax_impl(x, mask, dim), in.element())};
}

TPU_LOWERING(_masked_softmax_backward) {
  Value g0 = ctx.tensor("grad_output");
  ElementType ce = acc_type(g0.element());
  Value g = hlo::convert(g0, ce);
  Value y = hlo::convert(ctx.tensor("output"), ce);
  int64_t dim = c10::maybe_wrap_dim(ctx.opt_int("dim").value_or(-1), g.rank());
  Value mask = expand_mask(ctx, ctx.tensor("mask"), g.dims());
  Value zero = full_as(g, 0.0);
  g = hlo::select(mask, zero, g);
  Dims keep;
  for (int64_t i = 0; i < g.rank(); ++i)
    if (i != dim) keep.push_back(i);
  Value s = hlo::broadcast_in_dim(hlo::reduce(hlo::mul(g, y), {dim}, hlo::ReduceKind::kSum), g.dims(), keep);
  Value gi = hlo::mul(y, hlo::sub(g, s));
  return {hlo::convert(hlo::select(mask, zero, gi), g0.element())};
}

}  // namespace torch_tpu::lowering
