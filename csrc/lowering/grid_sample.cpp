// grid_sampler_2d / grid_sampler_3d and their backwards
// (nn.functional.grid_sample): bilinear/trilinear, nearest and (2-D) bicubic
// sampling with zeros/border/reflection padding, following the formulas of
// PyTorch's CPU kernels (GridSampler.h): unnormalize, clip / reflect, then
// weighted taps. Taps are gathers from the input flattened to [N*S, C] at
// n*S + spatial index; out-of-bounds taps read 0. The backward scatter-adds
// the weighted output gradient into the input and differentiates the
// weights for the grid gradient. bf16/f16 compute in f32.
#include <cmath>

#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

struct Sampler {
  Builder& b;
  ElementType ct;
  int D;               // spatial dims
  int64_t N, C, P, S;  // batch, channels, output points, input points
  Dims sizes;          // input spatial sizes, by grid component (x: W, y: H, z: D)
  Dims strides;        // flat strides, by grid component
  bool align;
  int64_t padding;     // 0 zeros, 1 border, 2 reflection
  Value flat;          // [N*S, C]

  Dims np() const { return {N, P}; }
  Value k(double v) const { return hlo::full(b, ct, np(), v); }

  // PyTorch's grid_sampler_compute_source_index_set_grad.
  std::pair<Value, Value> source(Value g, int64_t size, bool with_padding) const {
    double sc = align ? (size - 1) / 2.0 : size / 2.0;
    Value x = align ? hlo::mul(hlo::add(g, k(1)), k((size - 1) / 2.0))
                    : hlo::div(hlo::sub(hlo::mul(hlo::add(g, k(1)), k(size)), k(1)), k(2));
    Value mult = k(sc);
    if (!with_padding) return {x, mult};
    auto [y, m2] = pad_coord(x, size);
    return {y, hlo::mul(mult, m2)};
  }

  // compute_coordinates (with its gradient multiplier): border / reflection.
  std::pair<Value, Value> pad_coord(Value x, int64_t size) const {
    Value mult = k(1);
    auto clip = [&](Value v) {
      Value gm = hlo::select(hlo::compare(v, k(0), "LE"), k(0),
                             hlo::select(hlo::compare(v, k(size - 1), "GE"), k(0), k(1)));
      mult = hlo::mul(mult, gm);
      return hlo::clamp(k(0), v, k(size - 1));
    };
    if (padding == 1) {
      x = clip(x);
    } else if (padding == 2) {
      double lo2 = align ? 0 : -1, hi2 = align ? 2.0 * (size - 1) : 2.0 * size - 1;
      if (lo2 == hi2) {
        x = k(0);
        mult = k(0);
      } else {
        double mn = lo2 / 2, span = (hi2 - lo2) / 2;
        Value in = hlo::sub(x, k(mn));
        Value neg = hlo::compare(in, k(0), "LT");
        Value gm = hlo::select(neg, k(-1), k(1));
        in = hlo::unary("abs", in);
        Value extra = hlo::binary("remainder", in, k(span));
        Value flips = hlo::unary("floor", hlo::div(in, k(span)));
        Value half = hlo::unary("floor", hlo::div(flips, k(2)));
        Value even = hlo::compare(hlo::sub(flips, hlo::mul(half, k(2))), k(0), "EQ");
        x = hlo::select(even, hlo::add(extra, k(mn)), hlo::add(hlo::sub(k(span), extra), k(mn)));
        mult = hlo::mul(mult, hlo::select(even, gm, hlo::neg(gm)));
        x = clip(x);
      }
    }
    return {x, mult};
  }

  // Linear row index (n*S + spatial) and validity of integer-valued taps.
  std::pair<Value, Value> locate(const std::vector<Value>& idx) const {
    Value valid;
    Value lin = hlo::mul(hlo::iota(b, ElementType::kI64, np(), 0), hlo::full(b, ElementType::kI64, np(), S));
    for (int d = 0; d < D; ++d) {
      Value ok = hlo::binary("and", hlo::compare(idx[d], k(0), "GE"), hlo::compare(idx[d], k(sizes[d] - 1), "LE"));
      valid = d == 0 ? ok : hlo::binary("and", valid, ok);
      Value ci = hlo::convert(hlo::clamp(k(0), idx[d], k(sizes[d] - 1)), ElementType::kI64);
      lin = hlo::add(lin, hlo::mul(ci, hlo::full(b, ElementType::kI64, np(), strides[d])));
    }
    return {hlo::reshape(lin, {N, P, 1}), valid};
  }

  Value fetch(const std::vector<Value>& idx) const {
    auto [lin, valid] = locate(idx);
    hlo::GatherDims gd;
    gd.offset_dims = {2};
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.index_vector_dim = 2;
    Value v = hlo::gather(flat, lin, gd, {1, C}, {N, P, C});
    Value m = hlo::broadcast_in_dim(valid, {N, P, C}, {0, 1});
    return hlo::select(m, v, hlo::full(b, ct, {N, P, C}, 0));
  }

  // Adds w[N,P] * g[N,P,C] into acc [N*S, C] at the taps (invalid ones drop).
  Value spread(Value acc, const std::vector<Value>& idx, Value w, Value g) const {
    auto [lin, valid] = locate(idx);
    Value upd = hlo::mul(hlo::broadcast_in_dim(hlo::select(valid, w, k(0)), {N, P, C}, {0, 1}), g);
    hlo::ScatterDims sd;
    sd.update_window_dims = {2};
    sd.inserted_window_dims = {0};
    sd.scatter_dims_to_operand_dims = {0};
    sd.index_vector_dim = 2;
    return hlo::scatter(acc, lin, upd, sd, "add");
  }

  Value bc(Value w) const { return hlo::broadcast_in_dim(w, {N, P, C}, {0, 1}); }
  // sum over C of a[N,P,C] * g[N,P,C]
  Value dotc(Value a, Value g) const { return hlo::reduce(hlo::mul(a, g), {2}, hlo::ReduceKind::kSum); }
};

std::vector<Value> grid_sample(LowerCtx& ctx, int D, bool backward) {
  Builder& b = ctx.b();
  Value input = ctx.tensor("input"), grid = ctx.tensor("grid");
  const int64_t mode = ctx.int_arg("interpolation_mode");
  const bool align = ctx.bool_arg("align_corners");
  ElementType ct = input.element() == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
  TORCH_CHECK_NOT_IMPLEMENTED(hlo::is_float(input.element()), "\"", ctx.op_name(), "\" not implemented for '",
                              c10::toString(ctx.dtype_of("input")), "'");
  const Dims in = input.dims(), gdims = grid.dims();
  const int64_t N = in[0], C = in[1];
  int64_t S = 1, P = 1;
  for (int d = 0; d < D; ++d) {
    S *= in[2 + d];
    P *= gdims[1 + d];
  }
  Sampler s{b, ct, D, N, C, P, S, {}, {}, align, ctx.int_arg("padding_mode"), {}};
  for (int d = 0; d < D; ++d) {
    int sd = D - 1 - d;  // spatial dim of grid component d
    s.sizes.push_back(in[2 + sd]);
    int64_t st = 1;
    for (int j = sd + 1; j < D; ++j) st *= in[2 + j];
    s.strides.push_back(st);
  }
  Dims perm = {0};
  for (int d = 0; d < D; ++d) perm.push_back(2 + d);
  perm.push_back(1);
  s.flat = hlo::reshape(hlo::transpose(hlo::convert(input, ct), perm), {N * S, C});
  Value g = hlo::reshape(hlo::convert(grid, ct), {N, P, D});
  std::vector<Value> gc;
  for (int d = 0; d < D; ++d) gc.push_back(hlo::reshape(hlo::slice(g, {0, 0, d}, {N, P, d + 1}), {N, P}));

  Value gout;  // [N,P,C]
  if (backward) {
    Value go = hlo::convert(ctx.tensor("grad_output"), ct);  // [N,C,O...]
    Dims p2 = {0};
    for (int d = 0; d < D; ++d) p2.push_back(2 + d);
    p2.push_back(1);
    gout = hlo::reshape(hlo::transpose(go, p2), {N, P, C});
  }
  Value out = hlo::full(b, ct, {N, P, C}, 0);
  Value gin = hlo::full(b, ct, {N * S, C}, 0);
  std::vector<Value> ggrid(D, s.k(0));

  if (mode == 0 || mode == 1) {  // bilinear / nearest
    std::vector<Value> x(D), mult(D);
    for (int d = 0; d < D; ++d) std::tie(x[d], mult[d]) = s.source(gc[d], s.sizes[d], true);
    if (mode == 1) {
      std::vector<Value> idx(D);
      for (int d = 0; d < D; ++d) idx[d] = hlo::unary("round_nearest_even", x[d]);
      if (!backward) out = s.fetch(idx);
      else gin = s.spread(gin, idx, s.k(1), gout);
    } else {
      std::vector<Value> lo(D), fr(D);
      for (int d = 0; d < D; ++d) {
        lo[d] = hlo::unary("floor", x[d]);
        fr[d] = hlo::sub(x[d], lo[d]);
      }
      for (int corner = 0; corner < (1 << D); ++corner) {
        std::vector<Value> idx(D), w1(D);
        for (int d = 0; d < D; ++d) {
          bool hi = (corner >> d) & 1;
          idx[d] = hi ? hlo::add(lo[d], s.k(1)) : lo[d];
          w1[d] = hi ? fr[d] : hlo::sub(s.k(1), fr[d]);
        }
        Value w = w1[0];
        for (int d = 1; d < D; ++d) w = hlo::mul(w, w1[d]);
        if (!backward) {
          out = hlo::add(out, hlo::mul(s.bc(w), s.fetch(idx)));
        } else {
          gin = s.spread(gin, idx, w, gout);
          Value vg = s.dotc(s.fetch(idx), gout);  // [N,P]
          for (int d = 0; d < D; ++d) {
            bool hi = (corner >> d) & 1;
            Value dw = s.k(hi ? 1 : -1);
            for (int e = 0; e < D; ++e)
              if (e != d) dw = hlo::mul(dw, w1[e]);
            ggrid[d] = hlo::add(ggrid[d], hlo::mul(vg, dw));
          }
        }
      }
      if (backward)
        for (int d = 0; d < D; ++d) ggrid[d] = hlo::mul(ggrid[d], mult[d]);
    }
  } else {  // bicubic (2-D)
    TORCH_CHECK(D == 2, ctx.op_name(), ": bicubic interpolation only supports 4D input");
    const double A = -0.75;
    std::vector<Value> x(2), mult(2), lo(2), t(2);
    for (int d = 0; d < 2; ++d) {
      std::tie(x[d], mult[d]) = s.source(gc[d], s.sizes[d], false);
      lo[d] = hlo::unary("floor", x[d]);
      t[d] = hlo::sub(x[d], lo[d]);
    }
    // Coefficients and their derivatives in t, as values.
    auto coeffs = [&](Value tv, std::vector<Value>& c, std::vector<Value>& dc) {
      auto poly1 = [&](Value u) {  // ((A+2)u - (A+3)) u u + 1
        return hlo::add(hlo::mul(hlo::mul(hlo::sub(hlo::mul(s.k(A + 2), u), s.k(A + 3)), u), u), s.k(1));
      };
      auto poly2 = [&](Value u) {  // ((A u - 5A) u + 8A) u - 4A
        return hlo::sub(hlo::mul(hlo::add(hlo::mul(hlo::sub(hlo::mul(s.k(A), u), s.k(5 * A)), u), s.k(8 * A)), u),
                        s.k(4 * A));
      };
      auto d1 = [&](Value u) {  // 3(A+2)u^2 - 2(A+3)u
        return hlo::sub(hlo::mul(hlo::mul(s.k(3 * (A + 2)), u), u), hlo::mul(s.k(2 * (A + 3)), u));
      };
      auto d2 = [&](Value u) {  // 3A u^2 - 10A u + 8A
        return hlo::add(hlo::sub(hlo::mul(hlo::mul(s.k(3 * A), u), u), hlo::mul(s.k(10 * A), u)), s.k(8 * A));
      };
      Value one = s.k(1), two = s.k(2);
      Value u0 = hlo::add(tv, one), u2 = hlo::sub(one, tv), u3 = hlo::sub(two, tv);
      c = {poly2(u0), poly1(tv), poly1(u2), poly2(u3)};
      dc = {d2(u0), d1(tv), hlo::neg(d1(u2)), hlo::neg(d2(u3))};
    };
    std::vector<Value> cx, dcx, cy, dcy;
    coeffs(t[0], cx, dcx);
    coeffs(t[1], cy, dcy);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        std::vector<Value> idx(2);
        Value px = hlo::add(lo[0], s.k(i - 1)), py = hlo::add(lo[1], s.k(j - 1));
        // compute_coordinates: padding applied to the tap coordinate.
        idx[0] = s.padding == 0 ? px : s.pad_coord(px, s.sizes[0]).first;
        idx[1] = s.padding == 0 ? py : s.pad_coord(py, s.sizes[1]).first;
        Value w = hlo::mul(cx[i], cy[j]);
        if (!backward) {
          out = hlo::add(out, hlo::mul(s.bc(w), s.fetch(idx)));
        } else {
          gin = s.spread(gin, idx, w, gout);
          Value vg = s.dotc(s.fetch(idx), gout);
          ggrid[0] = hlo::add(ggrid[0], hlo::mul(vg, hlo::mul(dcx[i], cy[j])));
          ggrid[1] = hlo::add(ggrid[1], hlo::mul(vg, hlo::mul(cx[i], dcy[j])));
        }
      }
    }
    if (backward)
      for (int d = 0; d < 2; ++d) ggrid[d] = hlo::mul(ggrid[d], mult[d]);
  }

  Dims od = {N};
  for (int d = 0; d < D; ++d) od.push_back(gdims[1 + d]);
  if (!backward) {
    // [N,P,C] -> [N,C,O...]
    Dims shp = od;
    shp.push_back(C);
    Value y = hlo::reshape(out, shp);
    Dims p3 = {0, static_cast<int64_t>(D) + 1};
    for (int d = 0; d < D; ++d) p3.push_back(1 + d);
    return {hlo::transpose(y, p3)};
  }
  Dims shp = {N};
  for (int d = 0; d < D; ++d) shp.push_back(in[2 + d]);
  shp.push_back(C);
  Value gi = hlo::reshape(gin, shp);
  Dims p4 = {0, static_cast<int64_t>(D) + 1};
  for (int d = 0; d < D; ++d) p4.push_back(1 + d);
  gi = hlo::transpose(gi, p4);
  std::vector<Value> parts;
  for (int d = 0; d < D; ++d) parts.push_back(hlo::reshape(ggrid[d], {N, P, 1}));
  Dims gshape = od;
  gshape.push_back(D);
  Value gg = hlo::reshape(hlo::concatenate(parts, 2), gshape);
  return {gi, gg};
}

}  // namespace

TPU_LOWERING(grid_sampler_2d) { return grid_sample(ctx, 2, false); }
TPU_LOWERING(grid_sampler_3d) { return grid_sample(ctx, 3, false); }
TPU_LOWERING(grid_sampler_2d_backward) { return grid_sample(ctx, 2, true); }
TPU_LOWERING(grid_sampler_3d_backward) { return grid_sample(ctx, 3, true); }

}  // namespace torch_tpu::lowering
