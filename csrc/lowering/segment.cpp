// Segment reductions: segment_reduce (lengths or offsets form; sum, mean,
// max, min, prod; optional initial) and _segment_reduce_backward.
//
// Segments are data-dependent ranges along `axis`, but every output shape is
// fixed (one row per segment), so each rule builds a membership mask
// [outer, segment, position] from the segment bounds and reduces through it:
// O(segments x length) work, no host round trip. Values are computed in f32
// for bf16/f16 and rounded once. The checks CPU skips too (lengths summing to
// the axis size) are not made; out-of-range segments cover nothing.
#include <c10/util/Exception.h>

#include <string>

#include "lowering/compute_util.h"
#include "lowering/elementwise_util.h"
#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

using ew::and_;
using ew::is_nan;
using ew::or_;

enum class Red { kSum, kMean, kMax, kMin, kProd };

Red parse_reduction(LowerCtx& ctx, const std::string& r) {
  if (r == "sum") return Red::kSum;
  if (r == "mean") return Red::kMean;
  if (r == "max") return Red::kMax;
  if (r == "min") return Red::kMin;
  if (r == "prod") return Red::kProd;
  TORCH_CHECK(false, ctx.op_name(), ": reduction '", r, "' is not supported (sum, mean, max, min, prod)");
}

// Segment bounds [outer, S] (start, end), the segment count S, and the
// [outer, S, L] membership mask for data of `len` positions along the axis.
struct Segments {
  int64_t outer = 1, count = 0, len = 0, inner = 1;
  Dims outer_dims, inner_dims;
  Value start, end, member;
};

Segments segments(LowerCtx& ctx, const at::Tensor& data, int64_t axis) {
  TORCH_CHECK(ctx.is_none("indices") || !ctx.has("indices"),
              "segment_reduce(): indices based reduction is not supported yet.");
  bool offsets = ctx.has("offsets") && !ctx.is_none("offsets");
  bool lengths = ctx.has("lengths") && !ctx.is_none("lengths");
  TORCH_CHECK(offsets || lengths, "segment_reduce(): Either lengths or offsets must be defined.");
  const char* name = offsets ? "offsets" : "lengths";
  const at::Tensor& bounds = ctx.tensor_arg(name);
  TORCH_CHECK(bounds.scalar_type() == at::kLong || bounds.scalar_type() == at::kInt, ctx.op_name(), ": ", name,
              " must be int32 or int64, got ", bounds.scalar_type());
  TORCH_CHECK(data.dim() >= bounds.dim() && bounds.dim() >= 1, ctx.op_name(), ": ", name, " of shape ",
              bounds.sizes(), " does not fit data of shape ", data.sizes());
  axis = bounds.dim() - 1;
  Segments s;
  for (int64_t d = 0; d < axis; ++d) {
    TORCH_CHECK(bounds.size(d) == data.size(d), ctx.op_name(), ": ", name, " of shape ", bounds.sizes(),
                " does not match data of shape ", data.sizes(), " before the axis");
    s.outer *= data.size(d);
    s.outer_dims.push_back(data.size(d));
  }
  for (int64_t d = axis + 1; d < data.dim(); ++d) {
    s.inner *= data.size(d);
    s.inner_dims.push_back(data.size(d));
  }
  s.len = data.size(axis);
  int64_t n = bounds.size(axis);
  s.count = offsets ? n - 1 : n;
  TORCH_CHECK(s.count >= 0, ctx.op_name(), ": offsets must have at least one element");
  Builder& b = ctx.b();
  auto I = ElementType::kI64;
  Value v = hlo::reshape(ctx.operand(name, at::kLong), {s.outer, n});
  if (offsets) {
    s.start = hlo::slice(v, {0, 0}, {s.outer, s.count});
    s.end = hlo::slice(v, {0, 1}, {s.outer, n});
  } else {
    // Exclusive prefix sum of the lengths: start[s] = sum of lengths[k < s].
    Value lk = hlo::broadcast_in_dim(v, {s.outer, n, n}, {0, 2});
    Value before = hlo::compare(hlo::iota(b, I, {s.outer, n, n}, 2), hlo::iota(b, I, {s.outer, n, n}, 1), "LT");
    s.start = hlo::reduce(hlo::select(before, lk, hlo::zeros_like(lk)), {2}, hlo::ReduceKind::kSum);
    s.end = hlo::add(s.start, v);
  }
  Dims m = {s.outer, s.count, s.len};
  Value pos = hlo::iota(b, I, m, 2);
  s.member = and_(hlo::compare(pos, hlo::broadcast_in_dim(s.start, m, {0, 1}), "GE"),
                  hlo::compare(pos, hlo::broadcast_in_dim(s.end, m, {0, 1}), "LT"));
  return s;
}

Dims with_axis(const Segments& s, int64_t n) {
  Dims d = s.outer_dims;
  d.push_back(n);
  d.insert(d.end(), s.inner_dims.begin(), s.inner_dims.end());
  return d;
}

// Default start value of each reduction when no `initial` is given.
double identity(Red r) {
  switch (r) {
    case Red::kMax: return -INFINITY;
    case Red::kMin: return INFINITY;
    case Red::kProd: return 1;
    default: return 0;
  }
}

}  // namespace

// segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe, initial)
TPU_LOWERING(segment_reduce) {
  const at::Tensor& data = ctx.tensor_arg("data");
  TORCH_CHECK(at::isFloatingType(data.scalar_type()), ctx.op_name(), ": data must be floating point, got ",
              data.scalar_type());
  Red red = parse_reduction(ctx, ctx.str_arg("reduce"));
  Segments s = segments(ctx, data, ctx.int_arg("axis"));
  ElementType ce = acc_type(element_type(data.scalar_type()));
  Builder& b = ctx.b();
  bool by_lengths = ctx.has("lengths") && !ctx.is_none("lengths");
  if (by_lengths && !ctx.bool_arg("unsafe") && s.count > 0) {  // CPU's checks (it checks no offsets)
    Value len = hlo::sub(s.end, s.start);
    check_data(ctx, hlo::compare(len, hlo::zeros_like(len), "LT"), "segment_reduce(): lengths contains negative value!");
    Value total = hlo::reduce(len, {1}, hlo::ReduceKind::kSum);
    check_data(ctx, hlo::compare(total, hlo::full_like(total, static_cast<double>(s.len)), "NE"),
               "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
               "when !unsafe (" + std::to_string(s.len) + "); a row sums to {}",
               total);
  }
  Dims big = {s.outer, s.count, s.len, s.inner};
  Value x = hlo::convert(hlo::reshape(ctx.tensor("data"), {s.outer, s.len, s.inner}), ce);
  Value xb = hlo::broadcast_in_dim(x, big, {0, 2, 3});
  Value mb = hlo::broadcast_in_dim(s.member, big, {0, 1, 2});
  bool has_init = ctx.has("initial") && !ctx.is_none("initial");
  Dims od = {s.outer, s.count, s.inner};
  Value init = has_init ? hlo::broadcast_to(hlo::convert(ctx.operand("initial", data.scalar_type()), ce), od)
                        : hlo::full(b, ce, od, identity(red));
  Value r;
  switch (red) {
    case Red::kSum:
    case Red::kMean:
      r = hlo::add(init, hlo::reduce(hlo::select(mb, xb, hlo::zeros_like(xb)), {2}, hlo::ReduceKind::kSum));
      break;
    case Red::kProd:
      r = hlo::mul(init, hlo::reduce(hlo::select(mb, xb, hlo::full_like(xb, 1)), {2}, hlo::ReduceKind::kProd));
      break;
    case Red::kMax:
    case Red::kMin: {
      bool mx = red == Red::kMax;
      Value filler = hlo::full_like(xb, mx ? -INFINITY : INFINITY);
      Value sel = hlo::select(mb, xb, filler);
      Value ext = hlo::reduce(sel, {2}, mx ? hlo::ReduceKind::kMax : hlo::ReduceKind::kMin);
      // A NaN in the segment (or in initial) wins, as on CPU.
      Value any_nan = hlo::reduce(and_(mb, is_nan(xb)), {2}, hlo::ReduceKind::kOr);
      Value nan = hlo::full_like(ext, NAN);
      r = mx ? hlo::max(init, ext) : hlo::min(init, ext);
      r = hlo::select(or_(any_nan, is_nan(init)), nan, r);
      break;
    }
  }
  if (red == Red::kMean) {
    Value cnt = hlo::convert(hlo::broadcast_in_dim(hlo::sub(s.end, s.start), od, {0, 1}), ce);
    Value zero = hlo::zeros_like(cnt);
    Value positive = hlo::compare(cnt, zero, "GT");
    Value divided = hlo::select(and_(positive, ew::not_(is_nan(r))), hlo::div(r, cnt), r);
    r = has_init ? divided : hlo::select(positive, divided, hlo::full_like(r, NAN));
  }
  return {hlo::convert(hlo::reshape(r, with_axis(s, s.count)), element_type(data.scalar_type()))};
}

// _segment_reduce_backward(grad, output, data, reduction, *, lengths, offsets,
// axis, initial): CPU's formulas, including its tie rule for max/min (each
// tied element gets grad / ties, applied only where that is positive) and its
// explicit exclusive product at zeros and NaNs for prod.
TPU_LOWERING(_segment_reduce_backward) {
  const at::Tensor& data = ctx.tensor_arg("data");
  TORCH_CHECK(at::isFloatingType(data.scalar_type()), ctx.op_name(), ": data must be floating point, got ",
              data.scalar_type());
  Red red = parse_reduction(ctx, ctx.str_arg("reduce"));
  Segments s = segments(ctx, data, ctx.int_arg("axis"));
  ElementType ce = acc_type(element_type(data.scalar_type()));
  Builder& b = ctx.b();
  Dims big = {s.outer, s.count, s.len, s.inner};
  Dims xd = {s.outer, s.len, s.inner};
  Value x = hlo::convert(hlo::reshape(ctx.tensor("data"), xd), ce);
  Value g = hlo::convert(hlo::reshape(ctx.tensor("grad"), {s.outer, s.count, s.inner}), ce);
  Value out = hlo::convert(hlo::reshape(ctx.tensor("output"), {s.outer, s.count, s.inner}), ce);
  Value mb = hlo::broadcast_in_dim(s.member, big, {0, 1, 2});
  // Per data position: its segment's grad, output and length (zero outside
  // every segment).
  auto spread = [&](Value per_segment) {
    Value v = hlo::broadcast_in_dim(per_segment, big, {0, 1, 3});
    return hlo::reduce(hlo::select(mb, v, hlo::zeros_like(v)), {1}, hlo::ReduceKind::kSum);
  };
  Value inside = hlo::broadcast_in_dim(hlo::reduce(s.member, {1}, hlo::ReduceKind::kOr), xd, {0, 1});
  Value gx = spread(g);
  Value zero = hlo::zeros_like(x);
  Value r;
  switch (red) {
    case Red::kSum: r = gx; break;
    case Red::kMean: {
      Value cnt = hlo::convert(hlo::broadcast_in_dim(hlo::sub(s.end, s.start), {s.outer, s.count, s.inner}, {0, 1}), ce);
      r = spread(hlo::div(g, cnt));
      break;
    }
    case Red::kMax:
    case Red::kMin: {
      Value tie = or_(is_nan(x), hlo::compare(x, spread(out), "EQ"));
      Value gi = hlo::select(tie, gx, zero);
      Value tb = hlo::convert(hlo::broadcast_in_dim(tie, big, {0, 2, 3}), ce);
      Value ties = hlo::reduce(hlo::select(mb, tb, hlo::zeros_like(tb)), {2}, hlo::ReduceKind::kSum);
      Value tx = spread(ties);
      Value split = and_(hlo::compare(tx, hlo::full_like(tx, 2), "GE"), hlo::compare(gi, zero, "GT"));
      r = hlo::select(split, hlo::div(gi, tx), gi);
      break;
    }
    case Red::kProd: {
      Value plain = hlo::div(hlo::mul(gx, spread(out)), x);
      // Exclusive product over the other members of the same segment:
      // [outer, L(j), L(k), inner], k in j's segment and k != j.
      Dims pp = {s.outer, s.len, s.len, s.inner};
      auto I = ElementType::kI64;
      Value seg_ids = hlo::iota(b, I, {s.outer, s.count, s.len}, 1);
      Value sid = hlo::reduce(hlo::select(s.member, seg_ids, hlo::zeros_like(seg_ids)), {1}, hlo::ReduceKind::kSum);
      Value in_seg = hlo::reduce(s.member, {1}, hlo::ReduceKind::kOr);
      sid = hlo::select(in_seg, sid, hlo::full_like(sid, -1));
      Value same = and_(hlo::compare(hlo::broadcast_in_dim(sid, {s.outer, s.len, s.len}, {0, 1}),
                                     hlo::broadcast_in_dim(sid, {s.outer, s.len, s.len}, {0, 2}), "EQ"),
                        hlo::compare(hlo::iota(b, I, {s.outer, s.len, s.len}, 1),
                                     hlo::iota(b, I, {s.outer, s.len, s.len}, 2), "NE"));
      Value sameb = hlo::broadcast_in_dim(same, pp, {0, 1, 2});
      Value xk = hlo::broadcast_in_dim(x, pp, {0, 2, 3});
      Value excl = hlo::reduce(hlo::select(sameb, xk, hlo::full_like(xk, 1)), {2}, hlo::ReduceKind::kProd);
      bool has_init = ctx.has("initial") && !ctx.is_none("initial");
      if (has_init) excl = hlo::mul(excl, hlo::broadcast_to(hlo::convert(ctx.operand("initial", data.scalar_type()), ce), xd));
      Value special = or_(is_nan(x), hlo::compare(x, zero, "EQ"));
      r = hlo::select(special, hlo::mul(gx, excl), plain);
      break;
    }
  }
  r = hlo::select(inside, r, zero);
  return {hlo::convert(hlo::reshape(r, data.sizes().vec()), element_type(data.scalar_type()))};
}

}  // namespace torch_tpu::lowering
