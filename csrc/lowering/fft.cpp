// The three ATen FFT primitives every torch.fft function reaches:
//   _fft_c2c(self, dim, normalization, forward)
//   _fft_r2c(self, dim, normalization, onesided)
//   _fft_c2r(self, dim, normalization, last_dim_size)
// Each transformed dim is moved last and handed to stablehlo.fft. XLA's
// inverse transforms divide by n themselves; ATen's do not (normalization
// is a separate argument: 0 none, 1 by 1/sqrt(n), 2 by 1/n), so their
// results are multiplied back by n before ATen's scaling is applied.
#include <cmath>

#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

// Permutation moving `d` to the end (and back: the same swap).
Dims swap_last(int64_t rank, int64_t d) {
  Dims perm(rank);
  for (int64_t i = 0; i < rank; ++i) perm[i] = i;
  std::swap(perm[d], perm[rank - 1]);
  return perm;
}

// One stablehlo.fft over dim `d` of `x`; `length` is the signal length.
Value fft_1d(Value x, int64_t d, const char* type, int64_t length, ElementType result) {
  auto perm = swap_last(x.rank(), d);
  Value t = hlo::transpose(x, perm);
  Dims out = t.dims();
  out.back() = std::string(type) == "RFFT" ? length / 2 + 1 : length;
  Value r = x.builder().emit("fft", {t}, hlo::TensorType{result, out},
                             std::string("fft_type = #stablehlo<fft_type ") + type +
                                 ">, fft_length = array<i64: " + std::to_string(length) + ">");
  return hlo::transpose(r, perm);
}

ElementType complex_of(ElementType real) {
  return real == ElementType::kF64 || real == ElementType::kC128 ? ElementType::kC128 : ElementType::kC64;
}

Value scale(Value x, double factor) {
  if (factor == 1.0) return x;
  return hlo::mul(x, hlo::full_like(x, factor));
}

// ATen's normalization of a transform over `n` points, after undoing XLA's
// own 1/n for inverse transforms (`inverse_points`: the n XLA divided by).
double norm_factor(int64_t mode, double n, double inverse_points) {
  double f = inverse_points;
  if (mode == 1) f /= std::sqrt(n);
  if (mode == 2) f /= n;
  return f;
}

std::vector<int64_t> fft_dims(LowerCtx& ctx) {
  auto dims = ctx.ints_arg("dim");
  int64_t rank = ctx.tensor_arg("self").dim();
  for (auto& d : dims) d = c10::maybe_wrap_dim(d, rank);
  return dims;
}

}  // namespace

TPU_LOWERING(_fft_c2c) {
  auto dims = fft_dims(ctx);
  bool forward = ctx.bool_arg("forward");
  Value x = ctx.tensor("self");
  ElementType ce = complex_of(x.element());
  x = hlo::convert(x, ce);
  double n = 1;
  for (auto d : dims) {
    n *= x.dims()[d];
    x = fft_1d(x, d, forward ? "FFT" : "IFFT", x.dims()[d], ce);
  }
  return {scale(x, norm_factor(ctx.int_arg("normalization"), n, forward ? 1.0 : n))};
}

TPU_LOWERING(_fft_r2c) {
  auto dims = fft_dims(ctx);
  bool onesided = ctx.bool_arg("onesided");
  Value x = ctx.tensor("self");
  ElementType ce = complex_of(x.element());
  double n = 1;
  for (auto d : dims) n *= x.dims()[d];
  if (onesided && !dims.empty()) {
    // The last listed dim is halved by RFFT; the others are full transforms.
    int64_t last = dims.back();
    x = fft_1d(x, last, "RFFT", x.dims()[last], ce);
    dims.pop_back();
  } else {
    x = hlo::convert(x, ce);
  }
  for (auto d : dims) x = fft_1d(x, d, "FFT", x.dims()[d], ce);
  return {scale(x, norm_factor(ctx.int_arg("normalization"), n, 1.0))};
}

TPU_LOWERING(_fft_c2r) {
  auto dims = fft_dims(ctx);
  int64_t last_size = ctx.int_arg("last_dim_size");
  Value x = ctx.tensor("self");
  ElementType ce = complex_of(x.element());
  x = hlo::convert(x, ce);
  int64_t last = dims.back();
  dims.pop_back();
  double n = static_cast<double>(last_size);
  for (auto d : dims) {
    n *= x.dims()[d];
    x = fft_1d(x, d, "IFFT", x.dims()[d], ce);
  }
  // IRFFT reads exactly last_size/2 + 1 points of the half spectrum.
  int64_t half = last_size / 2 + 1, have = x.dims()[last];
  if (have > half) {
    Dims start(x.rank(), 0), limit = x.dims();
    limit[last] = half;
    x = hlo::slice(x, start, limit);
  } else if (have < half) {
    Dims lo(x.rank(), 0), hi(x.rank(), 0);
    hi[last] = half - have;
    x = hlo::pad(x, hlo::constant(x.builder(), ce, 0), lo, hi);
  }
  x = fft_1d(x, last, "IRFFT", last_size, hlo::complex_component(ce));
  return {scale(x, norm_factor(ctx.int_arg("normalization"), n, n))};
}

}  // namespace torch_tpu::lowering
