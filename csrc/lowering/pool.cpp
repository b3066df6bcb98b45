// Pooling: max_pool{2,3}d_with_indices, avg_pool{2,3}d, _adaptive_avg_pool{2,3}d,
// adaptive_max_pool{2,3}d, fractional_max_pool{2,3}d and their backward ops,
// max_unpool{2,3}d. The 1d functionals reach the 2d ops with a unit height.
//
// Window shapes are static, so each spatial dim's windows are a host-side
// table pos[o, k] (input position, or -1 where the window leaves the input:
// padding, ceil_mode overhang, short adaptive windows). A gather along each
// spatial dim turns x [..., I0, I1] into [..., O0, K0, O1, K1]; one reduce
// over the K dims then gives sums or (max, index) pairs. Backward ops are the
// transposes: scatter-adds (along each dim, or at the saved flat indices).
//
// Max/argmax follow PyTorch's CPU loops: the first maximum wins, any NaN
// beats numbers and the last NaN of a window wins; indices are flat offsets
// into each (unpadded) input plane. Sums of bf16/f16 accumulate in f32.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "lowering/compute_util.h"
#include "lowering/index_check.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

constexpr int64_t kNoIndex = std::numeric_limits<int64_t>::max();

// One spatial dim's windows: output o, offset k -> pos[o * k_size + k].
struct Win {
  int64_t in = 0, out = 0, k = 0;
  std::vector<int64_t> pos;
  std::vector<int64_t> count;  // divisor of each output (avg pools)
};

Win strided_windows(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  Win w{in, out, k, std::vector<int64_t>(out * k), {}};
  for (int64_t o = 0; o < out; ++o)
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = o * stride - pad + j * dil;
      w.pos[o * k + j] = i >= 0 && i < in ? i : -1;
    }
  return w;
}

Win adaptive_windows(int64_t in, int64_t out) {
  Win w{in, out, 0, {}, {}};
  std::vector<int64_t> st(out), en(out);
  for (int64_t o = 0; o < out; ++o) {
    st[o] = (o * in) / out;
    en[o] = ((o + 1) * in + out - 1) / out;
    w.k = std::max(w.k, en[o] - st[o]);
    w.count.push_back(en[o] - st[o]);
  }
  w.pos.assign(out * w.k, -1);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t j = 0; st[o] + j < en[o]; ++j) w.pos[o * w.k + j] = st[o] + j;
  return w;
}

Value i64_const(Builder& b, const Dims& dims, const std::vector<int64_t>& v) {
  int64_t n = static_cast<int64_t>(v.size());
  if (n == 0) return hlo::full(b, ElementType::kI64, dims, 0);
  std::string s = "value = dense<[";
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  s += "]> : tensor<" + std::to_string(n) + "xi64>";
  return hlo::reshape(b.emit("constant", {}, hlo::TensorType{ElementType::kI64, {n}}, s), dims);
}

std::vector<int64_t> clamped(const Win& w) {
  std::vector<int64_t> p = w.pos;
  for (auto& v : p) v = std::max<int64_t>(v, 0);
  return p;
}

// x's dim d replaced by [O, K]: x[..., idx[o, k], ...].
Value take_windows(Value x, int64_t d, Value idx) {
  int64_t r = x.rank(), O = idx.dim(0), K = idx.dim(1);
  hlo::GatherDims gd;
  for (int64_t i = 0; i < r; ++i)
    if (i != d) gd.offset_dims.push_back(i < d ? i : i + 1);
  gd.collapsed_slice_dims = {d};
  gd.start_index_map = {d};
  gd.index_vector_dim = 2;
  Dims slice = x.dims();
  slice[d] = 1;
  Dims res = x.dims();
  res[d] = O;
  res.insert(res.begin() + d + 1, K);
  return hlo::gather(x, hlo::reshape(idx, {O, K, 1}), gd, slice, res);
}

// Transpose of take_windows: adds upd (dim d replaced by [O, K]) into a
// zero tensor whose dim d has size `in`.
Value put_windows(Value upd, int64_t d, Value idx, int64_t in) {
  int64_t O = idx.dim(0), K = idx.dim(1);
  Dims base = upd.dims();
  base.erase(base.begin() + d + 1);
  base[d] = in;
  hlo::ScatterDims sd;
  for (int64_t i = 0; i < static_cast<int64_t>(base.size()); ++i)
    if (i != d) sd.update_window_dims.push_back(i < d ? i : i + 1);
  sd.inserted_window_dims = {d};
  sd.scatter_dims_to_operand_dims = {d};
  sd.index_vector_dim = 2;
  Value zeros = hlo::full(upd.builder(), upd.element(), base, 0);
  return hlo::scatter(zeros, hlo::reshape(idx, {O, K, 1}), upd, sd, "add");
}

struct Grid {
  Dims dims;         // [O0, K0, O1, K1, ...]
  Value valid;       // pred, over dims
  Value flat;        // flat input-plane index (garbage where invalid)
};

Grid grid(Builder& b, const std::vector<Win>& wins) {
  Grid g;
  for (auto& w : wins) {
    g.dims.push_back(w.out);
    g.dims.push_back(w.k);
  }
  int64_t stride = 1;
  for (int64_t i = static_cast<int64_t>(wins.size()) - 1; i >= 0; --i) {
    const Win& w = wins[i];
    Value p = hlo::broadcast_in_dim(i64_const(b, {w.out, w.k}, w.pos), g.dims, {2 * i, 2 * i + 1});
    Value v = hlo::compare(p, hlo::zeros_like(p), "GE");
    Value term = hlo::mul(p, hlo::full_like(p, static_cast<double>(stride)));
    g.valid = g.valid.valid() ? hlo::binary("and", g.valid, v) : v;
    g.flat = g.flat.valid() ? hlo::add(g.flat, term) : term;
    stride *= w.in;
  }
  return g;
}

// x [lead..., I0, I1, ...] -> [lead..., O0, K0, O1, K1, ...].
Value windowed(Builder& b, Value x, const std::vector<Win>& wins) {
  int64_t lead = x.rank() - static_cast<int64_t>(wins.size());
  for (size_t i = 0; i < wins.size(); ++i)
    x = take_windows(x, lead + 2 * static_cast<int64_t>(i), i64_const(b, {wins[i].out, wins[i].k}, clamped(wins[i])));
  return x;
}

Dims lead_bdims(int64_t lead, int64_t n) {
  Dims d;
  for (int64_t i = 0; i < n; ++i) d.push_back(lead + i);
  return d;
}

Dims k_dims(int64_t lead, int64_t nsp) {
  Dims d;
  for (int64_t i = 0; i < nsp; ++i) d.push_back(lead + 2 * i + 1);
  return d;
}

// Max and flat index over the K dims of (values, indices) laid out
// [lead..., O0, K0, ...]; invalid entries must hold (lowest, kNoIndex).
std::pair<Value, Value> argmax_windows(Value v, Value flat, const Dims& kd) {
  Builder& b = v.builder();
  ElementType e = v.element();
  bool fl = hlo::is_float(e);
  auto res = hlo::reduce_multi({v, flat}, {hlo::lowest(b, e), hlo::constant_int(b, ElementType::kI64, kNoIndex)}, kd,
                               [fl](Builder&, const std::vector<Value>& a) {
                                 Value av = a[0], ai = a[1], bv = a[2], bi = a[3];
                                 Value pick = hlo::binary(
                                     "or", hlo::compare(av, bv, "GT"),
                                     hlo::binary("and", hlo::compare(av, bv, "EQ"), hlo::compare(ai, bi, "LT")));
                                 if (fl) {
                                   Value an = hlo::compare(av, av, "NE"), bn = hlo::compare(bv, bv, "NE");
                                   Value other = hlo::binary("or", an, hlo::binary("and", hlo::unary("not", bn), pick));
                                   pick = hlo::select(hlo::binary("and", an, bn), hlo::compare(ai, bi, "GT"), other);
                                 }
                                 return std::vector<Value>{hlo::select(pick, av, bv), hlo::select(pick, ai, bi)};
                               });
  return {res[0], res[1]};
}

std::vector<Value> window_max(Builder& b, Value x, const std::vector<Win>& wins) {
  int64_t nsp = static_cast<int64_t>(wins.size()), lead = x.rank() - nsp;
  Value v = windowed(b, x, wins);
  Grid g = grid(b, wins);
  Dims bd = lead_bdims(lead, 2 * nsp);
  Value valid = hlo::broadcast_in_dim(g.valid, v.dims(), bd);
  Value flat = hlo::broadcast_in_dim(g.flat, v.dims(), bd);
  v = hlo::select(valid, v, hlo::broadcast_in_dim(hlo::lowest(b, v.element()), v.dims(), {}));
  flat = hlo::select(valid, flat, hlo::broadcast_in_dim(hlo::constant_int(b, ElementType::kI64, kNoIndex), flat.dims(), {}));
  auto [m, i] = argmax_windows(v, flat, k_dims(lead, nsp));
  return {m, i};
}

// Per-output divisor grid [O0, O1, ...] (product of per-dim counts).
Value divisor(Builder& b, ElementType e, const std::vector<Win>& wins) {
  Dims out;
  for (auto& w : wins) out.push_back(w.out);
  Value d;
  for (size_t i = 0; i < wins.size(); ++i) {
    Value c = hlo::broadcast_in_dim(hlo::convert(i64_const(b, {wins[i].out}, wins[i].count), e), out,
                                    {static_cast<int64_t>(i)});
    d = d.valid() ? hlo::mul(d, c) : c;
  }
  return d;
}

Value window_avg(Builder& b, Value x, const std::vector<Win>& wins, std::optional<int64_t> div_override) {
  int64_t nsp = static_cast<int64_t>(wins.size()), lead = x.rank() - nsp;
  x = hlo::convert(x, acc_type(x.element()));
  Value v = windowed(b, x, wins);
  Grid g = grid(b, wins);
  Value valid = hlo::broadcast_in_dim(g.valid, v.dims(), lead_bdims(lead, 2 * nsp));
  v = hlo::select(valid, v, hlo::zeros_like(v));
  Value s = hlo::reduce(v, k_dims(lead, nsp), hlo::ReduceKind::kSum);
  Value d = div_override ? hlo::full(b, s.element(), s.dims(), static_cast<double>(*div_override))
                         : hlo::broadcast_in_dim(divisor(b, s.element(), wins), s.dims(), lead_bdims(lead, nsp));
  return hlo::div(s, d);
}

// Gradient of window_avg: grad_output / divisor spread over each window.
Value window_avg_backward(Builder& b, Value gy, const std::vector<Win>& wins, std::optional<int64_t> div_override) {
  int64_t nsp = static_cast<int64_t>(wins.size()), lead = gy.rank() - nsp;
  gy = hlo::convert(gy, acc_type(gy.element()));
  Value d = div_override ? hlo::full(b, gy.element(), gy.dims(), static_cast<double>(*div_override))
                         : hlo::broadcast_in_dim(divisor(b, gy.element(), wins), gy.dims(), lead_bdims(lead, nsp));
  Value g = hlo::div(gy, d);
  Grid gr = grid(b, wins);
  Dims wd(gy.dims().begin(), gy.dims().begin() + lead);
  wd.insert(wd.end(), gr.dims.begin(), gr.dims.end());
  Dims bd = lead_bdims(0, lead);
  for (int64_t i = 0; i < nsp; ++i) bd.push_back(lead + 2 * i);
  Value u = hlo::broadcast_in_dim(g, wd, bd);
  u = hlo::select(hlo::broadcast_in_dim(gr.valid, wd, lead_bdims(lead, 2 * nsp)), u, hlo::zeros_like(u));
  for (int64_t i = nsp - 1; i >= 0; --i)
    u = put_windows(u, lead + 2 * i, i64_const(b, {wins[i].out, wins[i].k}, clamped(wins[i])), wins[i].in);
  return u;
}

Dims expand(std::vector<int64_t> v, int64_t n, const std::vector<int64_t>& fallback) {
  if (v.empty()) return fallback;
  if (v.size() == 1 && n > 1) return Dims(n, v[0]);
  return v;
}

int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil) {
  int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (o - 1) * s >= in + pad) --o;
  return o;
}

// Spatial output sizes: the meta kernel's, else from `fallback`.
Dims out_spatial(LowerCtx& ctx, int64_t nsp, const std::function<int64_t(int64_t)>& fallback) {
  Dims o;
  auto sizes = ctx.out_sizes(0);
  for (int64_t i = 0; i < nsp; ++i)
    o.push_back(sizes && static_cast<int64_t>(sizes->size()) >= nsp ? (*sizes)[sizes->size() - nsp + i] : fallback(i));
  return o;
}

struct PoolArgs {
  Dims k, s, p, d;
  bool ceil = false;
};

PoolArgs pool_args(LowerCtx& ctx, int64_t nsp) {
  PoolArgs a;
  a.k = expand(ctx.ints_arg("kernel_size"), nsp, {});
  TORCH_CHECK(static_cast<int64_t>(a.k.size()) == nsp, ctx.op_name(), ": kernel_size must have ", nsp, " elements");
  a.s = expand(ctx.ints_arg("stride"), nsp, a.k);
  a.p = expand(ctx.ints_arg("padding"), nsp, Dims(nsp, 0));
  a.d = ctx.has("dilation") ? expand(ctx.ints_arg("dilation"), nsp, Dims(nsp, 1)) : Dims(nsp, 1);
  a.ceil = ctx.has("ceil_mode") && ctx.bool_arg("ceil_mode");
  return a;
}

Dims in_spatial(const Dims& x, int64_t nsp) { return Dims(x.end() - nsp, x.end()); }

std::vector<Value> max_pool(LowerCtx& ctx, int64_t nsp) {
  Value x = ctx.tensor("self");
  PoolArgs a = pool_args(ctx, nsp);
  Dims in = in_spatial(x.dims(), nsp);
  Dims out = out_spatial(ctx, nsp, [&](int64_t i) { return pool_out(in[i], a.k[i], a.p[i], a.s[i], a.d[i], a.ceil); });
  std::vector<Win> wins;
  for (int64_t i = 0; i < nsp; ++i) wins.push_back(strided_windows(in[i], out[i], a.k[i], a.s[i], a.p[i], a.d[i]));
  return window_max(ctx.b(), x, wins);
}

std::vector<Win> avg_windows(const PoolArgs& a, const Dims& in, const Dims& out, bool include_pad) {
  std::vector<Win> wins;
  for (size_t i = 0; i < in.size(); ++i) {
    Win w = strided_windows(in[i], out[i], a.k[i], a.s[i], a.p[i], 1);
    for (int64_t o = 0; o < out[i]; ++o) {
      int64_t st = o * a.s[i] - a.p[i];
      int64_t c = include_pad ? std::min(st + a.k[i], in[i] + a.p[i]) - st
                              : std::min(st + a.k[i], in[i]) - std::max<int64_t>(st, 0);
      w.count.push_back(std::max<int64_t>(c, 1));
    }
    wins.push_back(std::move(w));
  }
  return wins;
}

std::vector<Value> avg_pool(LowerCtx& ctx, int64_t nsp) {
  Value x = ctx.tensor("self");
  PoolArgs a = pool_args(ctx, nsp);
  Dims in = in_spatial(x.dims(), nsp);
  Dims out = out_spatial(ctx, nsp, [&](int64_t i) { return pool_out(in[i], a.k[i], a.p[i], a.s[i], 1, a.ceil); });
  auto wins = avg_windows(a, in, out, ctx.bool_arg("count_include_pad"));
  return {window_avg(ctx.b(), x, wins, ctx.opt_int("divisor_override"))};
}

std::vector<Value> avg_pool_backward(LowerCtx& ctx, int64_t nsp) {
  Value gy = ctx.tensor("grad_output");
  PoolArgs a = pool_args(ctx, nsp);
  Dims in = in_spatial(ctx.tensor_arg("self").sizes().vec(), nsp);
  Dims out = in_spatial(gy.dims(), nsp);
  auto wins = avg_windows(a, in, out, ctx.bool_arg("count_include_pad"));
  return {window_avg_backward(ctx.b(), gy, wins, ctx.opt_int("divisor_override"))};
}

std::vector<Win> adaptive(const Dims& in, const Dims& out) {
  std::vector<Win> wins;
  for (size_t i = 0; i < in.size(); ++i) wins.push_back(adaptive_windows(in[i], out[i]));
  return wins;
}

// Gradient of a pool that saved flat plane indices: scatter-add.
Value index_backward(LowerCtx& ctx, int64_t nsp) {
  Value gy = ctx.tensor("grad_output"), idx = hlo::convert(ctx.tensor("indices"), ElementType::kI64);
  Dims xd = ctx.tensor_arg("self").sizes().vec();
  int64_t lead = static_cast<int64_t>(xd.size()) - nsp;
  int64_t L = 1, S = 1;
  for (int64_t i = 0; i < lead; ++i) L *= xd[i];
  for (int64_t i = lead; i < static_cast<int64_t>(xd.size()); ++i) S *= xd[i];
  int64_t O = L == 0 ? 0 : gy.type().numel() / L;
  Value g = hlo::reshape(hlo::convert(gy, acc_type(gy.element())), {L, O});
  idx = hlo::reshape(idx, {L, O});
  Value off = hlo::mul(hlo::iota(ctx.b(), ElementType::kI64, {L, O}, 0), hlo::full_like(idx, static_cast<double>(S)));
  Value r = hlo::scatter_1d(hlo::full(ctx.b(), g.element(), {L * S}, 0), hlo::add(idx, off), g, "add");
  return hlo::reshape(r, xd);
}

std::vector<Value> fractional_max_pool(LowerCtx& ctx, int64_t nsp) {
  Builder& b = ctx.b();
  Value x = ctx.tensor("self"), rs = ctx.tensor("random_samples");
  Dims k = ctx.ints_arg("kernel_size"), os = ctx.ints_arg("output_size");
  if (k.size() == 1) k = Dims(nsp, k[0]);
  if (os.size() == 1) os = Dims(nsp, os[0]);
  int64_t lead = x.rank() - nsp, L = 1, S = 1;
  for (int64_t i = 0; i < lead; ++i) L *= x.dim(i);
  Dims in = in_spatial(x.dims(), nsp);
  for (auto v : in) S *= v;
  Dims od(x.dims().begin(), x.dims().begin() + lead);
  od.insert(od.end(), os.begin(), os.end());
  if (L * S == 0)
    return {hlo::full(b, x.element(), od, 0), hlo::full(b, ElementType::kI64, od, 0)};
  ElementType e = rs.element();
  // random_samples is [N, C, nsp]; (batch n, plane c) uses row [n, c]. An
  // unbatched input is batch 1, so only rs[0] is read (CPU does the same;
  // FractionalMaxPool draws samples for a batch of 2 there).
  if (rs.rank() == 3 && lead >= 1) {
    int64_t n = lead == 2 ? x.dim(0) : 1, c = x.dim(lead - 1);
    TORCH_CHECK(rs.dim(0) >= n && rs.dim(1) >= c && rs.dim(2) == nsp, ctx.op_name(), ": random_samples of shape ",
                rs.dims(), " do not cover ", n, " batches of ", c, " planes");
    if (rs.dim(0) != n || rs.dim(1) != c) rs = hlo::slice(rs, {0, 0, 0}, {n, c, nsp});
  }
  rs = hlo::reshape(rs, {L, nsp});
  Dims gd{L};
  for (int64_t i = 0; i < nsp; ++i) {
    gd.push_back(os[i]);
    gd.push_back(k[i]);
  }
  Value flat;
  int64_t stride = S;
  for (int64_t i = 0; i < nsp; ++i) {
    stride /= in[i];
    // 2d samples are (w, h); 3d samples are (t, h, w).
    int64_t j = nsp == 2 ? 1 - i : i;
    Value u = hlo::reshape(hlo::slice(rs, {0, j}, {L, j + 1}), {L});
    int64_t O = os[i];
    Dims lo{L, O};
    Value start = hlo::full(b, ElementType::kI64, lo, static_cast<double>(in[i] - k[i]));
    if (O > 1) {
      Value alpha = hlo::div(hlo::constant(b, e, static_cast<double>(in[i] - k[i])), hlo::constant(b, e, static_cast<double>(O - 1)));
      Value ab = hlo::broadcast_in_dim(alpha, lo, {});
      Value ub = hlo::broadcast_in_dim(u, lo, {0});
      Value io = hlo::iota(b, ElementType::kI64, lo, 1);
      Value a = hlo::sub(hlo::convert(hlo::mul(hlo::add(hlo::convert(io, e), ub), ab), ElementType::kI64),
                         hlo::convert(hlo::mul(ub, ab), ElementType::kI64));
      start = hlo::select(hlo::compare(io, hlo::full_like(io, static_cast<double>(O - 1)), "LT"), a, start);
    }
    Dims lok{L, O, k[i]};
    Value pos = hlo::add(hlo::broadcast_in_dim(start, lok, {0, 1}), hlo::iota(b, ElementType::kI64, lok, 2));
    Value term = hlo::mul(pos, hlo::full_like(pos, static_cast<double>(stride)));
    term = hlo::broadcast_in_dim(term, gd, {0, 1 + 2 * i, 2 + 2 * i});
    flat = flat.valid() ? hlo::add(flat, term) : term;
  }
  Value off = hlo::mul(hlo::iota(b, ElementType::kI64, gd, 0), hlo::full(b, ElementType::kI64, gd, static_cast<double>(S)));
  Value v = hlo::gather_1d(hlo::reshape(x, {L * S}), hlo::add(flat, off));
  auto [m, i] = argmax_windows(v, flat, k_dims(1, nsp));
  return {hlo::reshape(m, od), hlo::reshape(i, od)};
}

Value max_unpool(LowerCtx& ctx) {
  Value x = ctx.tensor("self"), idx = hlo::convert(ctx.tensor("indices"), ElementType::kI64);
  Dims os = ctx.ints_arg("output_size");
  int64_t nsp = static_cast<int64_t>(os.size()), lead = x.rank() - nsp, L = 1, S = 1, I = 1;
  for (int64_t i = 0; i < lead; ++i) L *= x.dim(i);
  for (auto v : os) S *= v;
  for (int64_t i = lead; i < x.rank(); ++i) I *= x.dim(i);
  Value xv = hlo::reshape(x, {L, I});
  idx = hlo::reshape(idx, {L, I});
  // CPU's check: an index outside the plane would land in another plane
  std::string sizes;
  for (auto v : os) sizes += (sizes.empty() ? "" : "x") + std::to_string(v);
  Value bad = hlo::binary("or", hlo::compare(idx, hlo::full_like(idx, 0), "LT"),
                          hlo::compare(idx, hlo::full_like(idx, static_cast<double>(S)), "GE"));
  check_data(ctx, bad, "Found an invalid max index: {} (output volumes are of size " + sizes + ")", idx);
  Value off = hlo::mul(hlo::iota(ctx.b(), ElementType::kI64, {L, I}, 0), hlo::full_like(idx, static_cast<double>(S)));
  Value r = hlo::scatter_1d(hlo::full(ctx.b(), x.element(), {L * S}, 0), hlo::add(idx, off), xv);
  Dims od(x.dims().begin(), x.dims().begin() + lead);
  od.insert(od.end(), os.begin(), os.end());
  return hlo::reshape(r, od);
}

}  // namespace

TPU_LOWERING(max_pool2d_with_indices) { return max_pool(ctx, 2); }
TPU_LOWERING(max_pool3d_with_indices) { return max_pool(ctx, 3); }
TPU_LOWERING(max_pool2d_with_indices_backward) { return {index_backward(ctx, 2)}; }
TPU_LOWERING(max_pool3d_with_indices_backward) { return {index_backward(ctx, 3)}; }

TPU_LOWERING(avg_pool2d) { return avg_pool(ctx, 2); }
TPU_LOWERING(avg_pool3d) { return avg_pool(ctx, 3); }
TPU_LOWERING(avg_pool2d_backward) { return avg_pool_backward(ctx, 2); }
TPU_LOWERING(avg_pool3d_backward) { return avg_pool_backward(ctx, 3); }

namespace {
std::vector<Value> adaptive_avg(LowerCtx& ctx, int64_t nsp) {
  Value x = ctx.tensor("self");
  Dims in = in_spatial(x.dims(), nsp);
  Dims os = ctx.ints_arg("output_size");
  if (os.size() == 1) os = Dims(nsp, os[0]);
  return {window_avg(ctx.b(), x, adaptive(in, os), std::nullopt)};
}
std::vector<Value> adaptive_avg_backward(LowerCtx& ctx, int64_t nsp) {
  Value gy = ctx.tensor("grad_output");
  Dims in = in_spatial(ctx.tensor_arg("self").sizes().vec(), nsp);
  return {window_avg_backward(ctx.b(), gy, adaptive(in, in_spatial(gy.dims(), nsp)), std::nullopt)};
}
std::vector<Value> adaptive_max(LowerCtx& ctx, int64_t nsp) {
  Value x = ctx.tensor("self");
  Dims in = in_spatial(x.dims(), nsp);
  Dims os = ctx.ints_arg("output_size");
  if (os.size() == 1) os = Dims(nsp, os[0]);
  return window_max(ctx.b(), x, adaptive(in, os));
}
}  // namespace

TPU_LOWERING(_adaptive_avg_pool2d) { return adaptive_avg(ctx, 2); }
TPU_LOWERING(_adaptive_avg_pool3d) { return adaptive_avg(ctx, 3); }
TPU_LOWERING(_adaptive_avg_pool2d_backward) { return adaptive_avg_backward(ctx, 2); }
TPU_LOWERING(_adaptive_avg_pool3d_backward) { return adaptive_avg_backward(ctx, 3); }
// The out= forms of the public names (adaptive_avg_pool2d.out,
// adaptive_avg_pool3d.out, adaptive_avg_pool3d_backward.grad_input) reach the
// engine under their own names, with the same arguments. They have no meta
// kernel, so the engine cannot resize the out tensor: it must already have
// the result's shape.
namespace {
std::vector<Value> checked_out(LowerCtx& ctx, std::vector<Value> r, const char* out) {
  auto want = r[0].dims();
  auto got = ctx.tensor_arg(out).sizes().vec();
  TORCH_CHECK(got == want, ctx.op_name(), ": on tpu the ", out, "= tensor must already have the result's shape ", c10::IntArrayRef(want),
              " (got ", c10::IntArrayRef(got), "); no meta kernel exists to resize it");
  return r;
}
}  // namespace
TPU_LOWERING(adaptive_avg_pool2d) { return checked_out(ctx, adaptive_avg(ctx, 2), "out"); }
TPU_LOWERING(adaptive_avg_pool3d) { return checked_out(ctx, adaptive_avg(ctx, 3), "out"); }
TPU_LOWERING(adaptive_avg_pool3d_backward) {
  return checked_out(ctx, adaptive_avg_backward(ctx, 3), "grad_input");
}
TPU_LOWERING(adaptive_max_pool2d) { return adaptive_max(ctx, 2); }
TPU_LOWERING(adaptive_max_pool3d) { return adaptive_max(ctx, 3); }
TPU_LOWERING(adaptive_max_pool2d_backward) { return {index_backward(ctx, 2)}; }
TPU_LOWERING(adaptive_max_pool3d_backward) { return {index_backward(ctx, 3)}; }

TPU_LOWERING(fractional_max_pool2d) { return fractional_max_pool(ctx, 2); }
TPU_LOWERING(fractional_max_pool3d) { return fractional_max_pool(ctx, 3); }
TPU_LOWERING(fractional_max_pool2d_backward) { return {index_backward(ctx, 2)}; }
TPU_LOWERING(fractional_max_pool3d_backward) { return {index_backward(ctx, 3)}; }

TPU_LOWERING(max_unpool2d) { return {max_unpool(ctx)}; }
TPU_LOWERING(max_unpool3d) { return {max_unpool(ctx)}; }

}  // namespace torch_tpu::lowering
