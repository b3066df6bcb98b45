// Reductions: sum, mean, amax/amin, max/min (+indices), argmax/argmin, prod,
// var/std (+mean), all/any, logsumexp, norms, cumulative sums/products,
// count_nonzero.
//
// Reduced-precision floats (bf16/f16) accumulate in f32 and are rounded once
// at the end, like PyTorch's CPU kernels. Integer and bool sums/products
// accumulate in the output dtype the meta kernel chose (int64).
#include <algorithm>
#include <cmath>

#include "hlo/complex_ops.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

using hlo::ReduceKind;

// The type arithmetic runs in for results of dtype `t`.
ElementType acc_type(at::ScalarType t) {
  if (t == at::kBFloat16 || t == at::kHalf) return ElementType::kF32;
  if (t == at::kComplexHalf) return ElementType::kC64;
  return element_type(t);
}

bool float_or_complex(at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); }

// |x| in real type `e` (the dtype of a norm or variance of x): a complex x
// takes its modulus in its own precision first (converting a complex value
// to a real type would keep only its real part).
Value abs_as(Value x, ElementType e) {
  if (hlo::is_complex(x.element())) return hlo::convert(hlo::unary("abs", x), e);
  return hlo::unary("abs", hlo::convert(x, e));
}

at::ScalarType out_or(LowerCtx& ctx, int i, at::ScalarType fallback) {
  auto d = ctx.out_dtype(i);
  return d ? *d : fallback;
}

int64_t wrap_dim(LowerCtx& ctx, int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  TORCH_CHECK_INDEX(d >= -r && d < r, "Dimension out of range (expected to be in range of [", -r, ", ", r - 1,
                    "], but got ", d, ") in ", ctx.op_name());
  return d < 0 ? d + r : d;
}

Dims all_dims(int64_t rank) {
  Dims d;
  for (int64_t i = 0; i < rank; ++i) d.push_back(i);
  return d;
}

// Wrapped, sorted, deduplicated dims; a rank-0 input reduces over nothing.
Dims normalize(LowerCtx& ctx, const std::vector<int64_t>& raw, int64_t rank) {
  Dims out;
  for (auto d : raw) out.push_back(wrap_dim(ctx, d, rank));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (rank == 0) out.clear();
  return out;
}

// Dims named by argument `name` (int, int[] or None). None means every dim;
// so does an empty list when `empty_is_all` (sum, mean, amax, var, norm...).
Dims reduce_dims(LowerCtx& ctx, std::string_view name, int64_t rank, bool empty_is_all = true) {
  if (!ctx.has(name) || ctx.is_none(name)) return all_dims(rank);
  auto raw = ctx.ints_arg(name);
  if (raw.empty()) return empty_is_all ? all_dims(rank) : Dims{};
  return normalize(ctx, raw, rank);
}

bool keepdim(LowerCtx& ctx) { return ctx.has("keepdim") && ctx.bool_arg("keepdim"); }

// Shape of `in_dims` with `dims` reduced: kept as 1s or dropped.
Dims reduced_shape(const Dims& in_dims, const Dims& dims, bool keep) {
  Dims out;
  for (int64_t i = 0; i < static_cast<int64_t>(in_dims.size()); ++i) {
    bool red = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!red)
      out.push_back(in_dims[i]);
    else if (keep)
      out.push_back(1);
  }
  return out;
}

// Reduced value `r` (dims dropped) reshaped for keepdim.
Value finish(Value r, const Dims in_dims, const Dims& dims, bool keep) {
  return hlo::reshape(r, reduced_shape(in_dims, dims, keep));
}

// `r` (reduced over `dims` of a tensor shaped `in_dims`, dims dropped)
// broadcast back to `in_dims`.
Value expand_back(Value r, const Dims in_dims, const Dims& dims) {
  Dims bdims;
  for (int64_t i = 0; i < static_cast<int64_t>(in_dims.size()); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) bdims.push_back(i);
  return hlo::broadcast_in_dim(r, in_dims, bdims);
}

int64_t count(const Dims& in_dims, const Dims& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= in_dims[d];
  return n;
}

Value scalar(Builder& b, ElementType e, double v) { return hlo::constant(b, e, v); }


Value is_nan(Value x) { return hlo::compare(x, x, "NE"); }

Value nonzero(Value x) {
  if (x.element() == ElementType::kPred) return x;
  return hlo::compare(x, hlo::zeros_like(x), "NE");
}

// max/min over dims with NaN propagation for floats; and/or for bools.
Value reduce_extreme(Value x, const Dims& dims, bool is_max) {
  if (dims.empty()) return x;
  if (x.element() == ElementType::kPred) return hlo::reduce(x, dims, is_max ? ReduceKind::kOr : ReduceKind::kAnd);
  if (!hlo::is_float(x.element())) return hlo::reduce(x, dims, is_max ? ReduceKind::kMax : ReduceKind::kMin);
  Builder& b = x.builder();
  Value init = scalar(b, x.element(), is_max ? -INFINITY : INFINITY);
  const char* op = is_max ? "maximum" : "minimum";
  return hlo::reduce_multi({x}, {init}, dims, [op](Builder&, const std::vector<Value>& a) {
    Value m = hlo::binary(op, a[0], a[1]);
    m = hlo::select(is_nan(a[1]), a[1], m);
    m = hlo::select(is_nan(a[0]), a[0], m);
    return std::vector<Value>{m};
  })[0];
}

// (value, index) of the max/min of `x` along `dim`; ties and NaNs resolve to
// the first occurrence, NaN wins over numbers (PyTorch CPU semantics).
std::pair<Value, Value> arg_reduce(Value x, int64_t dim, bool is_max) {
  Builder& b = x.builder();
  ElementType orig = x.element();
  if (orig == ElementType::kPred) x = hlo::convert(x, ElementType::kI32);
  ElementType e = x.element();
  bool fl = hlo::is_float(e);
  Value idx = hlo::iota(b, ElementType::kI64, x.dims(), dim);
  Value init_v = is_max ? hlo::lowest(b, e) : hlo::highest(b, e);
  Value init_i = hlo::constant_int(b, ElementType::kI64, 0);
  auto res = hlo::reduce_multi({x, idx}, {init_v, init_i}, {dim}, [is_max, fl](Builder&, const std::vector<Value>& a) {
    Value av = a[0], ai = a[1], bv = a[2], bi = a[3];
    Value better = hlo::compare(av, bv, is_max ? "GT" : "LT");
    Value same = hlo::compare(av, bv, "EQ");
    if (fl) {
      Value an = is_nan(av), bn = is_nan(bv);
      Value bnot = hlo::unary("not", bn);
      better = hlo::binary("or", better, hlo::binary("and", an, bnot));
      same = hlo::binary("or", same, hlo::binary("and", an, bn));
    }
    Value first = hlo::compare(ai, bi, "LT");
    Value pick_a = hlo::binary("or", better, hlo::binary("and", same, first));
    return std::vector<Value>{hlo::select(pick_a, av, bv), hlo::select(pick_a, ai, bi)};
  });
  Value v = res[0];
  if (orig == ElementType::kPred) v = hlo::convert(v, ElementType::kPred);
  return {v, res[1]};
}

}  // namespace

// ---- sum / nansum / mean / prod --------------------------------------------

TPU_LOWERING(sum) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, ctx.dtype_of("self"));
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  Value xa = hlo::convert(x, acc_type(out));
  return {finish(hlo::reduce(xa, dims, ReduceKind::kSum), x.dims(), dims, keepdim(ctx))};
}

TPU_LOWERING(nansum) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, ctx.dtype_of("self"));
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  Value xa = hlo::convert(x, acc_type(out));
  if (hlo::is_float(xa.element()) || hlo::is_complex(xa.element()))
    xa = hlo::select(is_nan(xa), hlo::zeros_like(xa), xa);
  return {finish(hlo::reduce(xa, dims, ReduceKind::kSum), x.dims(), dims, keepdim(ctx))};
}

TPU_LOWERING(mean) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, ctx.dtype_of("self"));
  TORCH_CHECK(float_or_complex(out), ctx.op_name(), ": mean(): could not infer output dtype. Input dtype must be "
              "either a floating point or complex dtype. Got: ", out);
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  Value xa = hlo::convert(x, acc_type(out));
  Value s = hlo::reduce(xa, dims, ReduceKind::kSum);
  s = hlo::div(s, hlo::full_like(s, static_cast<double>(count(x.dims(), dims))));
  return {finish(s, x.dims(), dims, keepdim(ctx))};
}

TPU_LOWERING(prod) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, ctx.dtype_of("self"));
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  Value xa = hlo::convert(x, acc_type(out));
  return {finish(hlo::reduce(xa, dims, ReduceKind::kProd), x.dims(), dims, keepdim(ctx))};
}

// ---- extremes -----------------------------------------------------------------

TPU_LOWERING(amax) {
  Value x = ctx.tensor("self");
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  return {finish(reduce_extreme(x, dims, true), x.dims(), dims, keepdim(ctx))};
}

TPU_LOWERING(amin) {
  Value x = ctx.tensor("self");
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  return {finish(reduce_extreme(x, dims, false), x.dims(), dims, keepdim(ctx))};
}

namespace {

// max / min: full reduction (max, max.unary_out), or (values, indices)
// along one dim (max.dim, max.dim_max).
std::vector<Value> max_min(LowerCtx& ctx, bool is_max) {
  Value x = ctx.tensor("self");
  if (ctx.is_tensor("other")) {  // max.other is composite; kept for safety
    auto t = ctx.result_type({"self", "other"});
    auto dims = *ctx.out_sizes();
    Value a = hlo::broadcast_to(ctx.operand("self", t), dims), b = hlo::broadcast_to(ctx.operand("other", t), dims);
    Value m = hlo::binary(is_max ? "maximum" : "minimum", a, b);
    if (hlo::is_float(a.element())) {
      m = hlo::select(is_nan(b), b, m);
      m = hlo::select(is_nan(a), a, m);
    }
    return {m};
  }
  if (!ctx.has("dim")) {
    TORCH_CHECK(x.type().numel() > 0, ctx.op_name(), ": Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument.");
    return {reduce_extreme(x, all_dims(x.rank()), is_max)};
  }
  int64_t dim = wrap_dim(ctx, ctx.int_arg("dim"), x.rank());
  bool keep = keepdim(ctx);
  if (x.rank() == 0) return {x, hlo::constant_int(ctx.b(), ElementType::kI64, 0)};
  auto [v, i] = arg_reduce(x, dim, is_max);
  return {finish(v, x.dims(), {dim}, keep), finish(i, x.dims(), {dim}, keep)};
}

std::vector<Value> arg_max_min(LowerCtx& ctx, bool is_max) {
  Value x = ctx.tensor("self");
  bool keep = keepdim(ctx);
  auto d = ctx.opt_int("dim");
  if (!d) {
    Dims in_dims = x.dims();
    Value flat = hlo::reshape(x, {x.type().numel()});
    auto [v, i] = arg_reduce(flat, 0, is_max);
    Dims out = keep ? Dims(in_dims.size(), 1) : Dims{};
    return {hlo::reshape(i, out)};
  }
  int64_t dim = wrap_dim(ctx, *d, x.rank());
  if (x.rank() == 0) return {hlo::constant_int(ctx.b(), ElementType::kI64, 0)};
  auto [v, i] = arg_reduce(x, dim, is_max);
  return {finish(i, x.dims(), {dim}, keep)};
}

}  // namespace

TPU_LOWERING(max) { return max_min(ctx, true); }
TPU_LOWERING(min) { return max_min(ctx, false); }
TPU_LOWERING(argmax) { return arg_max_min(ctx, true); }
TPU_LOWERING(argmin) { return arg_max_min(ctx, false); }

TPU_LOWERING(aminmax) {
  Value x = ctx.tensor("self");
  // The structured out= wrapper's dtype check (the meta kernel skips it).
  for (const char* out : {"min", "max", "out0", "out1"}) {
    if (!ctx.has(out) || !ctx.is_tensor(out)) continue;
    const at::Tensor& o = ctx.tensor_arg(out);
    const at::Tensor& self = ctx.tensor_arg("self");
    TORCH_CHECK(o.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.dtype(),
                ", but got ", o.dtype(), " instead");
  }
  bool keep = keepdim(ctx);
  Dims dims = ctx.is_none("dim") ? all_dims(x.rank()) : normalize(ctx, {ctx.int_arg("dim")}, x.rank());
  return {finish(reduce_extreme(x, dims, false), x.dims(), dims, keep),
          finish(reduce_extreme(x, dims, true), x.dims(), dims, keep)};
}
// The older spelling: _aminmax() over everything, _aminmax.dim(dim, keepdim).
TPU_LOWERING_ALIAS(_aminmax, aminmax);

// ---- variance and standard deviation --------------------------------------------

namespace {

// (var, mean) in the accumulation type, reduced dims dropped. The variance
// of a complex x is real (the mean of |x - mean|^2); its mean stays complex.
std::pair<Value, Value> var_and_mean(LowerCtx& ctx, Value x, const Dims& dims, at::ScalarType out) {
  ElementType acc = acc_type(out);
  Value xa = hlo::convert(x, hlo::is_complex(x.element()) ? acc_type(scalar_type(x.element())) : acc);
  Builder& b = ctx.b();
  double n = static_cast<double>(count(x.dims(), dims));
  Value sum = hlo::reduce(xa, dims, ReduceKind::kSum);
  Value mean = hlo::div(sum, hlo::full_like(sum, n));
  Value d = hlo::sub(xa, expand_back(mean, x.dims(), dims));
  Value sq = hlo::is_complex(d.element())
                 ? hlo::add(hlo::mul(hlo::real(d), hlo::real(d)), hlo::mul(hlo::imag(d), hlo::imag(d)))
                 : hlo::mul(d, d);
  Value ss = hlo::reduce(hlo::convert(sq, acc), dims, ReduceKind::kSum);
  Value corr = ctx.is_none("correction") ? scalar(b, acc, 1.0)
                                          : ctx.operand("correction", scalar_type(acc));
  Value denom = hlo::max(hlo::sub(scalar(b, acc, n), corr), scalar(b, acc, 0.0));
  Value var = hlo::div(ss, hlo::broadcast_in_dim(denom, ss.dims(), {}));
  return {var, mean};
}

std::vector<Value> var_std(LowerCtx& ctx, bool take_sqrt, bool with_mean) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, ctx.dtype_of("self"));
  TORCH_CHECK(float_or_complex(out), ctx.op_name(), ": std and var only support floating point and complex dtypes");
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  bool keep = keepdim(ctx);
  auto [var, mean] = var_and_mean(ctx, x, dims, out);
  if (take_sqrt) var = hlo::unary("sqrt", var);
  std::vector<Value> r{finish(var, x.dims(), dims, keep)};
  if (with_mean) r.push_back(finish(mean, x.dims(), dims, keep));
  return r;
}

}  // namespace

TPU_LOWERING(var) { return var_std(ctx, false, false); }
TPU_LOWERING(std) { return var_std(ctx, true, false); }
TPU_LOWERING(var_mean) { return var_std(ctx, false, true); }
TPU_LOWERING(std_mean) { return var_std(ctx, true, true); }

// ---- logical ------------------------------------------------------------------------

namespace {

std::vector<Value> all_any(LowerCtx& ctx, bool is_all) {
  Value x = ctx.tensor("self");
  // all(): every dim; all.dim: one; all.dims: None = every dim, [] = none.
  Dims dims = reduce_dims(ctx, "dim", x.rank(), /*empty_is_all=*/false);
  Value p = nonzero(x);
  return {finish(hlo::reduce(p, dims, is_all ? ReduceKind::kAnd : ReduceKind::kOr), x.dims(), dims, keepdim(ctx))};
}

}  // namespace

TPU_LOWERING(all) { return all_any(ctx, true); }
TPU_LOWERING(any) { return all_any(ctx, false); }

TPU_LOWERING(count_nonzero) {
  Value x = ctx.tensor("self");
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  Value c = hlo::convert(nonzero(x), ElementType::kI64);
  return {hlo::reduce(c, dims, ReduceKind::kSum)};
}

// ---- logsumexp and norms ----------------------------------------------------------------

TPU_LOWERING(logsumexp) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, at::kFloat);
  if (!at::isFloatingType(out)) out = at::kFloat;
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  Value xa = hlo::convert(x, acc_type(out));
  Value m = reduce_extreme(xa, dims, true);
  Value inf_m = hlo::compare(hlo::unary("abs", m), hlo::full_like(m, INFINITY), "EQ");
  m = hlo::select(inf_m, hlo::zeros_like(m), m);
  Value ex = hlo::unary("exponential", hlo::sub(xa, expand_back(m, x.dims(), dims)));
  Value r = hlo::add(hlo::unary("log", hlo::reduce(ex, dims, ReduceKind::kSum)), m);
  return {finish(r, x.dims(), dims, keepdim(ctx))};
}

namespace {

// Vector p-norm over dims. The order is a Scalar, i.e. a runtime operand
// (one program serves every p), so all the special cases are computed and
// the right one selected at run time.
Value vector_norm(LowerCtx& ctx, const char* p_name) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, ctx.dtype_of("self"));
  TORCH_CHECK(float_or_complex(out), ctx.op_name(), ": Expected a floating point or complex tensor as input. Got ",
              out);
  Dims dims = reduce_dims(ctx, "dim", x.rank());
  ElementType e = acc_type(out);
  Builder& b = ctx.b();
  Value a = abs_as(x, e);
  auto sum = [&](Value v) { return hlo::reduce(v, dims, ReduceKind::kSum); };
  Value l2 = hlo::unary("sqrt", sum(hlo::mul(a, a)));
  Value r;
  if (ctx.is_none(p_name)) {
    r = l2;
  } else {
    Value p = ctx.operand(p_name, scalar_type(e));
    auto bc = [&](Value s) { return hlo::broadcast_in_dim(s, l2.dims(), {}); };
    auto is_p = [&](double v) { return hlo::compare(p, scalar(b, e, v), "EQ"); };
    Value general =
        hlo::binary("power", sum(hlo::binary("power", a, hlo::broadcast_in_dim(p, a.dims(), {}))),
                    bc(hlo::div(scalar(b, e, 1.0), p)));
    r = general;
    r = hlo::select(is_p(2.0), l2, r);
    r = hlo::select(is_p(1.0), sum(a), r);
    r = hlo::select(is_p(0.0), sum(hlo::convert(nonzero(a), e)), r);
    r = hlo::select(is_p(-INFINITY), reduce_extreme(a, dims, false), r);
    r = hlo::select(is_p(INFINITY), reduce_extreme(a, dims, true), r);
  }
  return finish(r, x.dims(), dims, keepdim(ctx));
}

}  // namespace

TPU_LOWERING(linalg_vector_norm) { return {vector_norm(ctx, "ord")}; }
TPU_LOWERING(norm) { return {vector_norm(ctx, "p")}; }

// ---- cumulative ---------------------------------------------------------------------------

namespace {

// Inclusive scan along `dim` by doubling steps (Hillis-Steele): log2(n)
// shifted combines.
Value scan(Value x, int64_t dim, const char* op, double identity) {
  if (x.rank() == 0) return x;
  int64_t n = x.dim(dim);
  Value id = scalar(x.builder(), x.element(), identity);
  for (int64_t s = 1; s < n; s *= 2) {
    Dims start(x.rank(), 0), limit = x.dims();
    limit[dim] = n - s;
    Dims low(x.rank(), 0), high(x.rank(), 0);
    low[dim] = s;
    Value shifted = hlo::pad(hlo::slice(x, start, limit), id, low, high);
    x = hlo::binary(op, x, shifted);
  }
  return x;
}

std::vector<Value> cumulative(LowerCtx& ctx, bool is_sum) {
  Value x = ctx.tensor("self");
  auto out = out_or(ctx, 0, ctx.dtype_of("self"));
  int64_t dim = wrap_dim(ctx, ctx.int_arg("dim"), x.rank());
  Value xa = hlo::convert(x, acc_type(out));
  if (xa.element() == ElementType::kPred)
    return {scan(xa, dim, is_sum ? "or" : "and", is_sum ? 0.0 : 1.0)};
  return {scan(xa, dim, is_sum ? "add" : "multiply", is_sum ? 0.0 : 1.0)};
}

}  // namespace

TPU_LOWERING(cumsum) { return cumulative(ctx, true); }
TPU_LOWERING(cumprod) { return cumulative(ctx, false); }

}  // namespace torch_tpu::lowering
