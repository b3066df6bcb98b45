// Upsampling: upsample_{nearest,linear,bilinear,bicubic,trilinear}*,
// _upsample_nearest_exact*, the antialiased _upsample_{bilinear,bicubic}2d_aa
// and every backward.
//
// All modes are separable: each spatial axis is resampled on its own, the
// last one first (the CPU kernels sum its taps innermost). Per axis, the taps
// of PyTorch's CPU kernels are computed here on the host with their arithmetic
// (opmath: float for f32/bf16/f16, double for f64): output position o reads
// T input positions idx[o, t] with weights w[o, t] (T = 2 linear, 4 cubic,
// the filter support antialiased, 1 nearest), embedded as constants. The
// forward gathers the taps and sums the weighted values; the backward does the
// same with the taps transposed (input position i gathers the gradient of
// every output that reads it, times that tap's weight). Only the taps
// the CPU kernel reads are touched, so a nan/inf input or gradient reaches
// the outputs it reaches there and no others (a dense [out, in] matrix would
// multiply every one of them by the 0 weights: 0 * nan is nan).
// Nearest forward is a plain gather (exact for every dtype, inf/nan included).
// Shapes, align_corners and scales are part of the program cache key, so the
// constants are fixed per compiled program.
#include <cmath>
#include <cstring>

#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

enum class Mode { kNearest, kNearestExact, kLinear, kCubic, kLinearAA, kCubicAA };

// A rank-N constant from host values, as a hex dense literal (exact).
Value host_constant(Builder& b, ElementType e, const Dims& dims, const std::vector<double>& vals) {
  static const char* hex = "0123456789ABCDEF";
  std::string lit = "\"0x";
  auto put = [&](const unsigned char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      lit += hex[p[i] >> 4];
      lit += hex[p[i] & 15];
    }
  };
  for (double v : vals) {
    if (e == ElementType::kF64) {
      put(reinterpret_cast<const unsigned char*>(&v), 8);
    } else if (e == ElementType::kF32) {
      float f = static_cast<float>(v);
      put(reinterpret_cast<const unsigned char*>(&f), 4);
    } else {
      int64_t i = static_cast<int64_t>(v);
      put(reinterpret_cast<const unsigned char*>(&i), 8);
    }
  }
  lit += "\"";
  hlo::TensorType t{e, dims};
  return b.emit("constant", {}, t, "value = dense<" + lit + "> : " + t.str());
}

template <typename T>
T compute_scale(int64_t in, int64_t out, bool align, std::optional<double> scale) {
  if (align) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : static_cast<T>(0);
  if (scale && *scale > 0.) return static_cast<T>(1.0 / *scale);
  return static_cast<T>(in) / static_cast<T>(out);
}

template <typename T>
T source_index(T scale, int64_t dst, bool align, bool cubic) {
  if (align) return scale * static_cast<T>(dst);
  T src = scale * (static_cast<T>(dst) + static_cast<T>(0.5)) - static_cast<T>(0.5);
  return (!cubic && src < static_cast<T>(0)) ? static_cast<T>(0) : src;
}

std::vector<int64_t> nearest_indices(Mode mode, int64_t in, int64_t out, std::optional<double> s) {
  std::vector<int64_t> idx(out);
  float scale = (s && *s > 0.) ? static_cast<float>(1.0 / *s) : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    if (mode == Mode::kNearest) {
      if (out == in) idx[o] = o;
      else if (out == 2 * in) idx[o] = o >> 1;
      else idx[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
    } else {
      idx[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>((static_cast<double>(o) + 0.5) * scale))), in - 1);
    }
  }
  return idx;
}

template <typename T>
T cubic1(T x, T A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
template <typename T>
T cubic2(T x, T A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

// One axis as taps: output position o reads input idx[o * T + t] with weight
// w[o * T + t], t < T, summed in t order like the CPU kernels. Every tap those
// kernels read is kept, 0 weights included (they multiply them too, so a nan
// there spreads on CPU as well). Only the antialiased filters, whose support
// varies with o, pad their rows: tap t of row o is live iff t < live[o]
// (`live` is empty when every tap is).
struct Taps {
  int64_t T = 1;
  Dims idx;
  std::vector<double> w;
  std::vector<int64_t> live;
};

template <typename T>
Taps taps(Mode mode, int64_t in, int64_t out, bool align, std::optional<double> s) {
  Taps tp;
  auto rows = [&](int64_t n) {
    tp.T = n;
    tp.idx.assign(static_cast<size_t>(out * n), 0);
    tp.w.assign(static_cast<size_t>(out * n), 0.0);
  };
  auto at = [&](int64_t o, int64_t t, int64_t i, T w) {
    tp.idx[static_cast<size_t>(o * tp.T + t)] = i;
    tp.w[static_cast<size_t>(o * tp.T + t)] = static_cast<double>(w);
  };
  if (mode == Mode::kNearest || mode == Mode::kNearestExact) {
    rows(1);
    auto idx = nearest_indices(mode, in, out, s);
    for (int64_t o = 0; o < out; ++o) at(o, 0, idx[o], 1);
    return tp;
  }
  if (mode == Mode::kLinear || mode == Mode::kCubic) {
    bool cubic = mode == Mode::kCubic;
    rows(cubic ? 4 : 2);
    T scale = compute_scale<T>(in, out, align, s);
    for (int64_t o = 0; o < out; ++o) {
      if (!cubic && in == out) {
        // CPU's compute_source_index_and_lambda copies: both taps at o, weights 1 and 0.
        at(o, 0, o, 1);
        at(o, 1, o, 0);
        continue;
      }
      T real = source_index<T>(scale, o, align, cubic);
      int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
      T lambda = std::min(std::max(real - static_cast<T>(i0), static_cast<T>(0)), static_cast<T>(1));
      if (!cubic) {
        int64_t off = i0 < in - 1 ? 1 : 0;
        at(o, 0, i0, static_cast<T>(1) - lambda);
        at(o, 1, i0 + off, lambda);
      } else {
        const T A = static_cast<T>(-0.75);
        T c[4] = {cubic2<T>(lambda + 1, A), cubic1<T>(lambda, A), cubic1<T>(1 - lambda, A), cubic2<T>(2 - lambda, A)};
        // Border taps are clamped onto the edge (and read it several times), like CPU.
        for (int j = 0; j < 4; ++j) at(o, j, std::max<int64_t>(std::min<int64_t>(i0 - 1 + j, in - 1), 0), c[j]);
      }
    }
    return tp;
  }
  // Antialiased (PIL-style) filters: row o covers [xmin, xmin + xsize).
  bool cubic = mode == Mode::kCubicAA;
  T interp = cubic ? 4 : 2;
  T scale = compute_scale<T>(in, out, align, s);
  T support = scale >= 1.0 ? static_cast<T>((interp * 0.5) * scale) : static_cast<T>(interp * 0.5);
  int64_t max_interp = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  auto filter = [&](T x) -> T {
    if (x < 0) x = -x;
    if (!cubic) return x < 1 ? 1 - x : 0;
    const T a = static_cast<T>(-0.5);
    if (x < 1) return cubic1<T>(x, a);
    if (x < 2) return cubic2<T>(x, a);
    return 0;
  };
  std::vector<int64_t> xmin(out);
  std::vector<std::vector<T>> ws(out);
  tp.live.resize(out);
  int64_t n = 1;
  for (int64_t o = 0; o < out; ++o) {
    T center = scale * (o + 0.5);
    T invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    xmin[o] = std::max(static_cast<int64_t>(center - support + 0.5), static_cast<int64_t>(0));
    int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in) - xmin[o];
    xsize = std::clamp(xsize, static_cast<int64_t>(0), max_interp);
    ws[o].resize(static_cast<size_t>(xsize));
    T total = 0;
    for (int64_t j = 0; j < xsize; ++j) {
      ws[o][j] = filter((j + xmin[o] - center + 0.5) * invscale);
      total += ws[o][j];
    }
    if (total != 0)
      for (auto& v : ws[o]) v /= total;
    tp.live[o] = xsize;
    n = std::max(n, xsize);
  }
  rows(n);
  bool padded = false;
  for (int64_t o = 0; o < out; ++o) {
    padded |= tp.live[o] < n;
    for (int64_t j = 0; j < tp.live[o]; ++j) at(o, j, xmin[o] + j, ws[o][j]);
    // Padding taps: any valid index, weight 0; masked wherever they are used.
    for (int64_t j = tp.live[o]; j < n; ++j) at(o, j, std::min(xmin[o], in - 1), 0);
  }
  if (!padded) tp.live.clear();
  return tp;
}

// The taps' weights (tap_weights) and live mask (tap_live) broadcast to
// [.., out, T, ..], with (out, T) at dims (d, d + 1).
Value tap_weights(Builder& b, ElementType ct, const Taps& tp, const Dims& td, int64_t d) {
  int64_t out = static_cast<int64_t>(tp.idx.size()) / tp.T;
  return hlo::broadcast_in_dim(host_constant(b, ct, {out, tp.T}, tp.w), td, {d, d + 1});
}

Value tap_live(Builder& b, const Taps& tp, const Dims& td, int64_t d) {
  int64_t out = static_cast<int64_t>(tp.live.size());
  std::vector<double> m(static_cast<size_t>(out * tp.T));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t t = 0; t < tp.T; ++t) m[static_cast<size_t>(o * tp.T + t)] = t < tp.live[o] ? 1 : 0;
  Value live = hlo::compare(host_constant(b, ElementType::kI64, {out, tp.T}, m),
                            hlo::full(b, ElementType::kI64, {out, tp.T}, 0), "NE");
  return hlo::broadcast_in_dim(live, td, {d, d + 1});
}

// The transpose of `tp` (an axis of `in` positions): row i lists every tap
// (o, t) with idx[o, t] == i, in increasing o then t, the order in which the
// CPU backward kernels add them into grad_input[i]. Rows are padded to the
// longest one.
Taps transpose_taps(const Taps& tp, int64_t in) {
  const int64_t out = static_cast<int64_t>(tp.idx.size()) / tp.T;
  std::vector<std::vector<std::pair<int64_t, double>>> rows(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t t = 0; t < tp.T; ++t) {
      if (!tp.live.empty() && t >= tp.live[o]) continue;
      size_t k = static_cast<size_t>(o * tp.T + t);
      rows[static_cast<size_t>(tp.idx[k])].emplace_back(o, tp.w[k]);
    }
  Taps tr;
  for (auto& row : rows) tr.T = std::max<int64_t>(tr.T, static_cast<int64_t>(row.size()));
  tr.idx.assign(static_cast<size_t>(in * tr.T), 0);
  tr.w.assign(static_cast<size_t>(in * tr.T), 0.0);
  tr.live.resize(static_cast<size_t>(in));
  bool padded = false;
  for (int64_t i = 0; i < in; ++i) {
    auto& row = rows[static_cast<size_t>(i)];
    tr.live[i] = static_cast<int64_t>(row.size());
    padded |= tr.live[i] < tr.T;
    for (size_t j = 0; j < row.size(); ++j) {
      tr.idx[static_cast<size_t>(i * tr.T) + j] = row[j].first;
      tr.w[static_cast<size_t>(i * tr.T) + j] = row[j].second;
    }
  }
  if (!padded) tr.live.clear();
  return tr;
}

// Resamples dim d of x by `tp`: one gather of every tap to [.., out, T, ..],
// weighted, then summed over T from `init`: -0 forward (the identity of +:
// CPU starts from the first product, so a -0 result stays -0), +0 backward
// (CPU zeroes grad_input and adds into it). Padding taps are selected to -0
// rather than weighted by 0 (0 * inf is nan).
Value gather_taps(Builder& b, Value x, int64_t d, const Taps& tp, ElementType ct, double init) {
  Dims td = x.dims();
  td[d] = static_cast<int64_t>(tp.idx.size()) / tp.T;
  td.insert(td.begin() + d + 1, tp.T);
  Value v = hlo::reshape(hlo::take_along_dim(x, d, hlo::constant_i64_vector(b, tp.idx)), td);
  Value p = hlo::mul(v, tap_weights(b, ct, tp, td, d));
  if (!tp.live.empty()) p = hlo::select(tap_live(b, tp, td, d), p, hlo::full(b, ct, td, -0.0));
  return hlo::reduce_multi({p}, {hlo::constant(b, ct, init)}, {d + 1}, [](Builder& rb, const std::vector<Value>& a) {
    return std::vector<Value>{rb.emit("add", {a[0], a[1]}, a[0].type())};
  })[0];
}

std::optional<double> opt_scale(LowerCtx& ctx, const char* name) {
  if (!ctx.has(name)) return std::nullopt;
  return ctx.opt_float(name);
}

std::vector<Value> upsample(LowerCtx& ctx, Mode mode, int k, bool backward) {
  const char* in_name = backward ? "grad_output" : (ctx.has("input") ? "input" : "self");
  Value x = ctx.tensor(in_name);
  const Dims xd = x.dims();
  const int64_t r = static_cast<int64_t>(xd.size());
  std::vector<int64_t> in_sz(k), out_sz(k);
  if (backward) {
    auto is = ctx.ints_arg("input_size"), os = ctx.ints_arg("output_size");
    TORCH_CHECK(static_cast<int64_t>(is.size()) == r && static_cast<int>(os.size()) == k, ctx.op_name(),
                ": unexpected input_size/output_size");
    for (int i = 0; i < k; ++i) {
      in_sz[i] = is[r - k + i];
      out_sz[i] = os[i];
    }
  } else {
    auto osz = ctx.out_sizes(0);
    TORCH_CHECK(osz && static_cast<int64_t>(osz->size()) == r, ctx.op_name(), ": unknown output size");
    for (int i = 0; i < k; ++i) {
      in_sz[i] = xd[r - k + i];
      out_sz[i] = (*osz)[r - k + i];
    }
  }
  bool align = ctx.has("align_corners") ? ctx.bool_arg("align_corners") : false;
  std::vector<std::optional<double>> scales(k);
  if (ctx.has("scale_factors")) {
    if (!ctx.is_none("scale_factors")) {
      auto v = ctx.arg("scale_factors").toDoubleVector();
      for (int i = 0; i < k && i < static_cast<int>(v.size()); ++i) scales[i] = v[i];
    }
  } else if (k == 1) {
    scales[0] = opt_scale(ctx, "scales");
  } else {
    static const char* names3[] = {"scales_d", "scales_h", "scales_w"};
    for (int i = 0; i < k; ++i) scales[i] = opt_scale(ctx, names3[3 - k + i]);
  }
  const bool f64 = x.element() == ElementType::kF64;
  Builder& b = ctx.b();
  bool nearest = mode == Mode::kNearest || mode == Mode::kNearestExact;
  // CPU kernels: floating types, plus uint8 for nearest and the 2-D modes.
  const bool u8 = x.element() == ElementType::kU8;
  TORCH_CHECK_NOT_IMPLEMENTED(hlo::is_float(x.element()) || (u8 && !backward && (nearest || k == 2)), "\"",
                              ctx.op_name(), "\" not implemented for '", ctx.dtype_of(in_name), "'");
  if (nearest && !backward) {
    for (int i = 0; i < k; ++i) {
      int64_t d = r - k + i;
      auto idx = nearest_indices(mode, in_sz[i], out_sz[i], scales[i]);
      Value ind = host_constant(b, ElementType::kI64, {out_sz[i], 1},
                                std::vector<double>(idx.begin(), idx.end()));
      hlo::GatherDims gd;
      Dims slice_sizes = x.dims(), result = x.dims();
      slice_sizes[d] = 1;
      result[d] = out_sz[i];
      for (int64_t p = 0; p < r; ++p)
        if (p != d) gd.offset_dims.push_back(p);
      gd.collapsed_slice_dims = {d};
      gd.start_index_map = {d};
      gd.index_vector_dim = 1;
      // Gather puts the batch (index) dim where offset dims leave room: d.
      x = hlo::gather(x, ind, gd, slice_sizes, result);
    }
    return {x};
  }
  ElementType ct = f64 ? ElementType::kF64 : ElementType::kF32;
  const bool aa = mode == Mode::kLinearAA || mode == Mode::kCubicAA;
  x = hlo::convert(x, ct);
  // CPU's bicubic backward copies the gradient when no axis changes size (its
  // forward, like the other modes, still reads the 0-weighted neighbours).
  if (mode == Mode::kCubic && backward && in_sz == out_sz) return {x};
  for (int i = k - 1; i >= 0; --i) {
    // The antialiased forward leaves an axis of unchanged size as it is (CPU
    // skips it; its taps would read a 0-weighted neighbour).
    if (aa && !backward && in_sz[i] == out_sz[i]) continue;
    int64_t d = r - k + i;
    auto tp = f64 ? taps<double>(mode, in_sz[i], out_sz[i], align, scales[i])
                  : taps<float>(mode, in_sz[i], out_sz[i], align, scales[i]);
    // The backward gathers too, with the taps transposed: a gather fuses and
    // runs in parallel on XLA:CPU, a scatter-add runs serially.
    x = backward ? gather_taps(b, x, d, transpose_taps(tp, in_sz[i]), ct, 0.0)
                 : gather_taps(b, x, d, tp, ct, -0.0);
  }
  if (u8) x = hlo::clamp(hlo::full(b, ct, x.dims(), 0), hlo::unary("round_nearest_even", x), hlo::full(b, ct, x.dims(), 255));
  return {x};
}

}  // namespace

TPU_LOWERING(upsample_nearest1d) { return upsample(ctx, Mode::kNearest, 1, false); }
TPU_LOWERING(upsample_nearest2d) { return upsample(ctx, Mode::kNearest, 2, false); }
TPU_LOWERING(upsample_nearest3d) { return upsample(ctx, Mode::kNearest, 3, false); }
TPU_LOWERING(upsample_nearest1d_backward) { return upsample(ctx, Mode::kNearest, 1, true); }
TPU_LOWERING(upsample_nearest2d_backward) { return upsample(ctx, Mode::kNearest, 2, true); }
TPU_LOWERING(upsample_nearest3d_backward) { return upsample(ctx, Mode::kNearest, 3, true); }
TPU_LOWERING(_upsample_nearest_exact1d) { return upsample(ctx, Mode::kNearestExact, 1, false); }
TPU_LOWERING(_upsample_nearest_exact2d) { return upsample(ctx, Mode::kNearestExact, 2, false); }
TPU_LOWERING(_upsample_nearest_exact3d) { return upsample(ctx, Mode::kNearestExact, 3, false); }
TPU_LOWERING(_upsample_nearest_exact1d_backward) { return upsample(ctx, Mode::kNearestExact, 1, true); }
TPU_LOWERING(_upsample_nearest_exact2d_backward) { return upsample(ctx, Mode::kNearestExact, 2, true); }
TPU_LOWERING(_upsample_nearest_exact3d_backward) { return upsample(ctx, Mode::kNearestExact, 3, true); }
TPU_LOWERING(upsample_linear1d) { return upsample(ctx, Mode::kLinear, 1, false); }
TPU_LOWERING(upsample_bilinear2d) { return upsample(ctx, Mode::kLinear, 2, false); }
TPU_LOWERING(upsample_trilinear3d) { return upsample(ctx, Mode::kLinear, 3, false); }
TPU_LOWERING(upsample_linear1d_backward) { return upsample(ctx, Mode::kLinear, 1, true); }
TPU_LOWERING(upsample_bilinear2d_backward) { return upsample(ctx, Mode::kLinear, 2, true); }
TPU_LOWERING(upsample_trilinear3d_backward) { return upsample(ctx, Mode::kLinear, 3, true); }
TPU_LOWERING(upsample_bicubic2d) { return upsample(ctx, Mode::kCubic, 2, false); }
TPU_LOWERING(upsample_bicubic2d_backward) { return upsample(ctx, Mode::kCubic, 2, true); }
TPU_LOWERING(_upsample_bilinear2d_aa) { return upsample(ctx, Mode::kLinearAA, 2, false); }
TPU_LOWERING(_upsample_bilinear2d_aa_backward) { return upsample(ctx, Mode::kLinearAA, 2, true); }
TPU_LOWERING(_upsample_bicubic2d_aa) { return upsample(ctx, Mode::kCubicAA, 2, false); }
TPU_LOWERING(_upsample_bicubic2d_aa_backward) { return upsample(ctx, Mode::kCubicAA, 2, true); }

}  // namespace torch_tpu::lowering
