// Upsampling: upsample_{nearest,linear,bilinear,bicubic,trilinear}*,
// _upsample_nearest_exact*, the antialiased _upsample_{bilinear,bicubic}2d_aa
// and every backward.
//
// All modes are separable: each spatial axis is resampled on its own. The
// per-axis [out, in] interpolation matrix is computed here on the host with
// the arithmetic of PyTorch's CPU kernels (opmath: float for f32/bf16/f16,
// double for f64) and embedded as a constant; the sampling is a dot_general
// per axis, and the backward is the same with the matrix transposed.
// Nearest forward is a gather (exact for every dtype, inf/nan included).
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

// [out, in] weights, row-major.
template <typename T>
std::vector<double> weights(Mode mode, int64_t in, int64_t out, bool align, std::optional<double> s) {
  std::vector<double> w(static_cast<size_t>(out * in), 0.0);
  auto at = [&](int64_t o, int64_t i) -> double& { return w[static_cast<size_t>(o * in + i)]; };
  if (mode == Mode::kNearest || mode == Mode::kNearestExact) {
    auto idx = nearest_indices(mode, in, out, s);
    for (int64_t o = 0; o < out; ++o) at(o, idx[o]) = 1.0;
    return w;
  }
  if (mode == Mode::kLinear || mode == Mode::kCubic) {
    bool cubic = mode == Mode::kCubic;
    T scale = compute_scale<T>(in, out, align, s);
    for (int64_t o = 0; o < out; ++o) {
      T real = source_index<T>(scale, o, align, cubic);
      int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
      T lambda = std::min(std::max(real - static_cast<T>(i0), static_cast<T>(0)), static_cast<T>(1));
      if (!cubic) {
        int64_t off = i0 < in - 1 ? 1 : 0;
        at(o, i0) += static_cast<double>(static_cast<T>(1) - lambda);
        at(o, i0 + off) += static_cast<double>(lambda);
      } else {
        const T A = static_cast<T>(-0.75);
        T c[4] = {cubic2<T>(lambda + 1, A), cubic1<T>(lambda, A), cubic1<T>(1 - lambda, A), cubic2<T>(2 - lambda, A)};
        for (int j = 0; j < 4; ++j) {
          int64_t i = std::max<int64_t>(std::min<int64_t>(i0 - 1 + j, in - 1), 0);
          at(o, i) += static_cast<double>(c[j]);
        }
      }
    }
    return w;
  }
  // Antialiased (PIL-style) filters.
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
  for (int64_t o = 0; o < out; ++o) {
    T center = scale * (o + 0.5);
    T invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), static_cast<int64_t>(0));
    int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in) - xmin;
    xsize = std::clamp(xsize, static_cast<int64_t>(0), max_interp);
    std::vector<T> ws(static_cast<size_t>(xsize));
    T total = 0;
    for (int64_t j = 0; j < xsize; ++j) {
      ws[j] = filter((j + xmin - center + 0.5) * invscale);
      total += ws[j];
    }
    for (int64_t j = 0; j < xsize; ++j) at(o, xmin + j) = static_cast<double>(total != 0 ? ws[j] / total : ws[j]);
  }
  return w;
}

// Moves the last dim of a rank-r value to position d.
Value last_to(Value y, int64_t d) {
  int64_t r = static_cast<int64_t>(y.dims().size());
  Dims perm;
  for (int64_t p = 0; p < r; ++p) perm.push_back(p < d ? p : (p == d ? r - 1 : p - 1));
  return hlo::transpose(y, perm);
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
  x = hlo::convert(x, ct);
  for (int i = 0; i < k; ++i) {
    int64_t d = r - k + i;
    auto w = f64 ? weights<double>(mode, in_sz[i], out_sz[i], align, scales[i])
                 : weights<float>(mode, in_sz[i], out_sz[i], align, scales[i]);
    Value m = host_constant(b, ct, {out_sz[i], in_sz[i]}, w);
    // Forward contracts `in` (matrix dim 1); backward contracts `out` (dim 0).
    x = last_to(hlo::dot_general(x, m, {{}, {}, {d}, {backward ? 0 : 1}}, ct, "HIGHEST"), d);
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
