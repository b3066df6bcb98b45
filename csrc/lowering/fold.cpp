// im2col / col2im (nn.functional.unfold / fold).
//
// im2col: the zero-padded input is sliced once per kernel offset with the
// stride as slice stride, and the kh*kw slices are stacked between channel
// and position dims ([N, C*kh*kw, L], channel-major like PyTorch).
// col2im: each kernel offset's [N, C, oh, ow] block is placed into the padded
// image by a pad with interior padding (stride - 1) and the blocks are summed;
// the padding is cut off at the end. bf16/f16 sums accumulate in f32.
#include "lowering/compute_util.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

struct Geometry {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Geometry geometry(LowerCtx& ctx) {
  auto k = ctx.ints_arg("kernel_size"), d = ctx.ints_arg("dilation"), p = ctx.ints_arg("padding"),
       s = ctx.ints_arg("stride");
  TORCH_CHECK(k.size() == 2 && d.size() == 2 && p.size() == 2 && s.size() == 2, ctx.op_name(),
              ": kernel_size, dilation, padding and stride must have 2 elements");
  return {k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
}

}  // namespace

TPU_LOWERING(im2col) {
  Geometry g = geometry(ctx);
  Value x = ctx.tensor("self");
  bool batched = x.dims().size() == 4;
  if (!batched) {
    Dims d = x.dims();
    d.insert(d.begin(), 1);
    x = hlo::reshape(x, d);
  }
  const int64_t n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
  const int64_t oh = (h + 2 * g.ph - (g.dh * (g.kh - 1) + 1)) / g.sh + 1;
  const int64_t ow = (w + 2 * g.pw - (g.dw * (g.kw - 1) + 1)) / g.sw + 1;
  Value zero = hlo::constant(ctx.b(), x.element(), 0);
  Value xp = hlo::pad(x, zero, {0, 0, g.ph, g.pw}, {0, 0, g.ph, g.pw});
  std::vector<Value> pieces;
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      Value s = hlo::slice(xp, {0, 0, i * g.dh, j * g.dw},
                           {n, c, i * g.dh + (oh - 1) * g.sh + 1, j * g.dw + (ow - 1) * g.sw + 1}, {1, 1, g.sh, g.sw});
      pieces.push_back(hlo::reshape(s, {n, c, 1, oh * ow}));
    }
  }
  Value y = hlo::reshape(hlo::concatenate(pieces, 2), {n, c * g.kh * g.kw, oh * ow});
  if (!batched) y = hlo::reshape(y, {c * g.kh * g.kw, oh * ow});
  return {y};
}

TPU_LOWERING(col2im) {
  Geometry g = geometry(ctx);
  auto osz = ctx.ints_arg("output_size");
  TORCH_CHECK(osz.size() == 2, ctx.op_name(), ": output_size must have 2 elements");
  Value x = ctx.tensor("self");
  bool batched = x.dims().size() == 3;
  if (!batched) {
    Dims d = x.dims();
    d.insert(d.begin(), 1);
    x = hlo::reshape(x, d);
  }
  const int64_t h = osz[0], w = osz[1];
  const int64_t oh = (h + 2 * g.ph - (g.dh * (g.kh - 1) + 1)) / g.sh + 1;
  const int64_t ow = (w + 2 * g.pw - (g.dw * (g.kw - 1) + 1)) / g.sw + 1;
  const int64_t n = x.dims()[0], c = x.dims()[1] / (g.kh * g.kw);
  const int64_t hp = h + 2 * g.ph, wp = w + 2 * g.pw;
  ElementType acc = acc_type(x.element());
  x = hlo::reshape(hlo::convert(x, acc), {n, c, g.kh * g.kw, oh, ow});
  Value zero = hlo::constant(ctx.b(), acc, 0);
  Value sum = hlo::full(ctx.b(), acc, {n, c, hp, wp}, 0);
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      int64_t kk = i * g.kw + j;
      Value blk = hlo::reshape(hlo::slice(x, {0, 0, kk, 0, 0}, {n, c, kk + 1, oh, ow}), {n, c, oh, ow});
      int64_t lo_h = i * g.dh, lo_w = j * g.dw;
      int64_t hi_h = hp - (lo_h + (oh - 1) * g.sh + 1), hi_w = wp - (lo_w + (ow - 1) * g.sw + 1);
      blk = hlo::pad(blk, zero, {0, 0, lo_h, lo_w}, {0, 0, hi_h, hi_w}, {0, 0, g.sh - 1, g.sw - 1});
      sum = hlo::add(sum, blk);
    }
  }
  Value y = hlo::slice(sum, {0, 0, g.ph, g.pw}, {n, c, g.ph + h, g.pw + w});
  if (!batched) y = hlo::reshape(y, {c, h, w});
  return {y};
}

}  // namespace torch_tpu::lowering
