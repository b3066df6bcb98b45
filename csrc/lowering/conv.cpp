// Convolutions: convolution_overrideable and convolution_backward_overrideable.
//
// at::_convolution checks shapes and dtypes, then sends devices it does not
// know (PrivateUse1) to these two "overrideable" ops. Their default kernels
// are CompositeExplicitAutograd stubs that throw, so the boxed fallback never
// sees them: this file routes both to the lowering engine itself.
//
// Each is one stablehlo.convolution per result (1d/2d/3d alike, as
// _convolution may also hand 1d convolutions over as 2d ones):
//   forward            conv(x, w)
//   transposed forward conv(x dilated by stride, w flipped with in/out swapped)
//   grad_input         the transposed convolution of grad_output (and back)
//   grad_weight        a convolution over the batch: x and grad_output swap the
//                      roles of batch and feature, groups become batch groups
//   grad_bias          sum of grad_output over all but the channel dim
// bf16/f16 compute in f32 and round once (PyTorch CPU accumulates in f32);
// f32 asks for HIGHEST precision. No meta kernel exists for these ops, so the
// rules compute their output shapes themselves.
#include <torch/library.h>

#include "exec/op_runner.h"
#include "lowering/compute_util.h"
#include "lowering/registry.h"

namespace torch_tpu::aten_conv {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
  m.impl("convolution_backward_overrideable", torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
}

}  // namespace torch_tpu::aten_conv

namespace torch_tpu::lowering {
namespace {

// One stablehlo.convolution. The two special dims of every operand are dims
// 0 and 1 (spatial dims follow in order); `*_swapped` says which is which:
// lhs [b, f] or [f, b], rhs [o, i] or [i, o], out [b, f] or [f, b].
struct ConvSpec {
  bool lhs_swapped = false, rhs_swapped = false, out_swapped = false;
  Dims strides, lo, hi, lhs_dil, rhs_dil;
  int64_t feature_groups = 1, batch_groups = 1;
};

std::string layout(int64_t rank, char first, char second) {
  std::string s = "[";
  s += first;
  s += ", ";
  s += second;
  for (int64_t i = 2; i < rank; ++i) s += ", " + std::to_string(i - 2);
  return s + "]";
}

Value conv(Value lhs, Value rhs, const ConvSpec& s) {
  int64_t nsp = lhs.rank() - 2;
  int64_t lb = s.lhs_swapped ? 1 : 0;
  int64_t ko = s.rhs_swapped ? 1 : 0;
  int64_t batch = lhs.dim(lb) / s.batch_groups, feat = rhs.dim(ko);
  Dims out(2);
  out[s.out_swapped ? 1 : 0] = batch;
  out[s.out_swapped ? 0 : 1] = feat;
  std::string pad = "dense<[";
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t in = lhs.dim(i + 2), k = rhs.dim(i + 2);
    int64_t in_d = in == 0 ? 0 : (in - 1) * s.lhs_dil[i] + 1;
    int64_t k_d = k == 0 ? 0 : (k - 1) * s.rhs_dil[i] + 1;
    int64_t span = in_d + s.lo[i] + s.hi[i] - k_d;
    out.push_back(span < 0 ? 0 : span / s.strides[i] + 1);
    pad += (i ? ", [" : "[") + std::to_string(s.lo[i]) + ", " + std::to_string(s.hi[i]) + "]";
  }
  pad += "]> : tensor<" + std::to_string(nsp) + "x2xi64>";
  ElementType e = lhs.element();
  std::string prec = e == ElementType::kF32 || e == ElementType::kF64 ? "HIGHEST" : "DEFAULT";
  std::string attrs =
      "dimension_numbers = #stablehlo.conv<" + layout(lhs.rank(), s.lhs_swapped ? 'f' : 'b', s.lhs_swapped ? 'b' : 'f') +
      "x" + layout(rhs.rank(), s.rhs_swapped ? 'i' : 'o', s.rhs_swapped ? 'o' : 'i') + "->" +
      layout(lhs.rank(), s.out_swapped ? 'f' : 'b', s.out_swapped ? 'b' : 'f') + ">, window_strides = " +
      hlo::dims_attr(s.strides) + ", padding = " + pad + ", lhs_dilation = " + hlo::dims_attr(s.lhs_dil) +
      ", rhs_dilation = " + hlo::dims_attr(s.rhs_dil) + ", feature_group_count = " +
      std::to_string(s.feature_groups) + " : i64, batch_group_count = " + std::to_string(s.batch_groups) +
      " : i64, precision_config = [#stablehlo<precision " + prec + ">, #stablehlo<precision " + prec + ">]";
  return lhs.builder().emit("convolution", {lhs, rhs}, hlo::TensorType{e, out}, attrs);
}

struct Params {
  Dims stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

Dims expand(std::vector<int64_t> v, int64_t n, int64_t fill) {
  if (v.empty()) return Dims(n, fill);
  if (static_cast<int64_t>(v.size()) == 1 && n > 1) return Dims(n, v[0]);
  return v;
}

Params params(LowerCtx& ctx, int64_t nsp) {
  Params p;
  p.stride = expand(ctx.ints_arg("stride"), nsp, 1);
  p.padding = expand(ctx.ints_arg("padding"), nsp, 0);
  p.dilation = expand(ctx.ints_arg("dilation"), nsp, 1);
  p.output_padding = expand(ctx.ints_arg("output_padding"), nsp, 0);
  p.transposed = ctx.bool_arg("transposed");
  p.groups = ctx.int_arg("groups");
  TORCH_CHECK(static_cast<int64_t>(p.stride.size()) == nsp && static_cast<int64_t>(p.padding.size()) == nsp &&
                  static_cast<int64_t>(p.dilation.size()) == nsp,
              ctx.op_name(), ": expected stride, padding and dilation of length ", nsp);
  return p;
}

void check_supported(LowerCtx& ctx, Value x) {
  TORCH_CHECK_NOT_IMPLEMENTED(x.element() != ElementType::kPred, "\"", ctx.op_name(), "\" not implemented for 'Bool'");
}

// Plain convolution of x [N, C, ...] with w [O, C/g, ...]; with
// `out_spatial`, the high padding is whatever gives those sizes (the input
// gradient of a transposed convolution).
Value conv_forward(Value x, Value w, const Params& p, const Dims* out_spatial = nullptr) {
  int64_t nsp = x.rank() - 2;
  ConvSpec s;
  s.strides = p.stride;
  s.lo = p.padding;
  s.hi = p.padding;
  s.lhs_dil = Dims(nsp, 1);
  s.rhs_dil = p.dilation;
  s.feature_groups = p.groups;
  if (out_spatial) {
    for (int64_t i = 0; i < nsp; ++i) {
      int64_t kd = p.dilation[i] * (w.dim(i + 2) - 1);
      s.hi[i] = ((*out_spatial)[i] - 1) * p.stride[i] + kd + 1 - x.dim(i + 2) - s.lo[i];
    }
  }
  return conv(x, w, s);
}

// Transposed convolution of x [N, C, ...] with w [C, O/g, ...] whose
// spatial sizes come out as `out_spatial`: output_padding is whatever makes
// them so (extra rows at the high end).
Value conv_transposed(Value x, Value w, const Params& p, const Dims& out_spatial) {
  int64_t nsp = x.rank() - 2, g = p.groups;
  int64_t cin = w.dim(0), cout_g = w.dim(1);
  // [g, C/g, O/g, K...] -> [g, O/g, C/g, K...] -> [O, C/g, K...], flipped.
  Dims split{g, cin / g, cout_g};
  Dims perm{0, 2, 1};
  Dims merged{g * cout_g, cin / g};
  Dims spatial_dims;
  for (int64_t i = 0; i < nsp; ++i) {
    split.push_back(w.dim(i + 2));
    perm.push_back(i + 3);
    merged.push_back(w.dim(i + 2));
    spatial_dims.push_back(i + 2);
  }
  Value wt = hlo::reshape(hlo::transpose(hlo::reshape(w, split), perm), merged);
  wt = hlo::reverse(wt, spatial_dims);
  ConvSpec s;
  s.strides = Dims(nsp, 1);
  s.lhs_dil = p.stride;
  s.rhs_dil = p.dilation;
  s.feature_groups = g;
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t kd = p.dilation[i] * (w.dim(i + 2) - 1);
    int64_t lo = kd - p.padding[i];
    int64_t in_d = (x.dim(i + 2) - 1) * p.stride[i] + 1;
    // out = in_d + lo + hi - kd
    s.lo.push_back(lo);
    s.hi.push_back(out_spatial[i] - in_d - lo + kd);
  }
  return conv(x, wt, s);
}

// Gradient of a convolution's weight: `lhs` is the tensor the kernel slides
// over (x for a plain convolution, grad_output for a transposed one), `rhs`
// the other. Channels act as batch and the batch as features; the result is
// [rhs channels, lhs channels / groups, k...], the weight's layout.
Value conv_weight_grad(Value lhs, Value rhs, const Params& p, const Dims& k) {
  int64_t nsp = lhs.rank() - 2;
  ConvSpec s;
  s.lhs_swapped = s.rhs_swapped = s.out_swapped = true;
  s.strides = p.dilation;
  s.rhs_dil = p.stride;
  s.lhs_dil = Dims(nsp, 1);
  s.batch_groups = p.groups;
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t l = lhs.dim(i + 2), r = rhs.dim(i + 2);
    s.lo.push_back(p.padding[i]);
    int64_t rd = r == 0 ? 0 : (r - 1) * p.stride[i] + 1;
    s.hi.push_back((k[i] - 1) * p.dilation[i] + rd - l - p.padding[i]);
  }
  return conv(lhs, rhs, s);
}

Dims spatial(Value v) { return Dims(v.dims().begin() + 2, v.dims().end()); }

// The convolution (p.transposed or not) plus the optional "bias" argument,
// computed in acc_type and rounded once to x's type.
Value conv_with_bias(LowerCtx& ctx, Value x, Value w, const Params& p) {
  int64_t nsp = x.rank() - 2;
  ElementType orig = x.element(), acc = acc_type(orig);
  x = hlo::convert(x, acc);
  w = hlo::convert(w, acc);
  Value y;
  if (!p.transposed) {
    y = conv_forward(x, w, p);
  } else {
    Dims out;
    for (int64_t i = 0; i < nsp; ++i)
      out.push_back((x.dim(i + 2) - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (w.dim(i + 2) - 1) +
                    p.output_padding[i] + 1);
    y = conv_transposed(x, w, p, out);
  }
  if (ctx.has("bias") && !ctx.is_none("bias")) {
    Value bias = hlo::convert(ctx.tensor("bias"), acc);
    y = hlo::add(y, hlo::broadcast_in_dim(bias, y.dims(), {1}));
  }
  return hlo::convert(y, orig);
}

}  // namespace

TPU_LOWERING(convolution_overrideable) {
  Value x = ctx.tensor("input"), w = ctx.tensor("weight");
  check_supported(ctx, x);
  int64_t nsp = x.rank() - 2;
  TORCH_CHECK(nsp >= 1 && w.rank() == x.rank(), ctx.op_name(), ": expected input and weight of equal rank >= 3, got ",
              x.rank(), " and ", w.rank());
  Params p = params(ctx, nsp);
  // CPU's kernels reject mixed dtypes; _convolution does not check for us.
  TORCH_CHECK(x.element() == w.element(), "Input type (", ctx.dtype_of("input"), ") and weight type (",
              ctx.dtype_of("weight"), ") should be the same");
  TORCH_CHECK(ctx.is_none("bias") || ctx.dtype_of("bias") == ctx.dtype_of("input"), "Input type (",
              ctx.dtype_of("input"), ") and bias type (", ctx.dtype_of("bias"), ") should be the same");
  // No meta kernel: the engine takes the value's own dtype.
  return {conv_with_bias(ctx, x, w, p)};
}

TPU_LOWERING(convolution_backward_overrideable) {
  Value gy = ctx.tensor("grad_output"), x = ctx.tensor("input"), w = ctx.tensor("weight");
  check_supported(ctx, x);
  int64_t nsp = x.rank() - 2;
  Params p = params(ctx, nsp);
  std::vector<bool> mask{true, true, true};
  if (ctx.has("output_mask")) {
    auto m = ctx.arg("output_mask").toBoolList();
    for (size_t i = 0; i < 3 && i < m.size(); ++i) mask[i] = m.get(i);
  }
  ElementType gy_type = gy.element(), x_type = x.element(), w_type = w.element();
  ElementType acc = acc_type(x.element());
  gy = hlo::convert(gy, acc);
  x = hlo::convert(x, acc);
  w = hlo::convert(w, acc);
  Builder& b = ctx.b();
  int64_t out_channels = p.transposed ? w.dim(1) * p.groups : w.dim(0);

  Value gi, gw, gb;
  if (mask[0]) {
    Dims xs = spatial(x);
    gi = p.transposed ? conv_forward(gy, w, p, &xs) : conv_transposed(gy, w, p, xs);
  } else {
    gi = hlo::full(b, acc, x.dims(), 0);
  }
  if (mask[1]) {
    gw = p.transposed ? conv_weight_grad(gy, x, p, spatial(w)) : conv_weight_grad(x, gy, p, spatial(w));
  } else {
    gw = hlo::full(b, acc, w.dims(), 0);
  }
  if (mask[2]) {
    Dims dims{0};
    for (int64_t i = 2; i < gy.rank(); ++i) dims.push_back(i);
    gb = hlo::reduce(gy, dims, hlo::ReduceKind::kSum);
  } else {
    gb = hlo::full(b, acc, {out_channels}, 0);
  }
  return {hlo::convert(gi, x_type), hlo::convert(gw, w_type), hlo::convert(gb, gy_type)};
}

}  // namespace torch_tpu::lowering

// ---- the CPU backends' own convolution entry points --------------------------
// _slow_conv2d_forward, slow_conv3d_forward, slow_conv_dilated2d/3d,
// slow_conv_transpose2d/3d (and _slow_conv2d_backward): reachable directly
// (torch._C._nn.*, thnn_conv2d) with `self` as input and some parameters
// absent (dilation 1, output_padding 0, groups 1).
namespace torch_tpu::lowering {
namespace {

Params slow_params(LowerCtx& ctx, int64_t nsp, bool transposed) {
  auto get = [&](const char* name, int64_t fill) {
    return ctx.has(name) ? expand(ctx.ints_arg(name), nsp, fill) : Dims(nsp, fill);
  };
  Params p;
  p.stride = get("stride", 1);
  p.padding = get("padding", 0);
  p.dilation = get("dilation", 1);
  p.output_padding = get("output_padding", 0);
  p.transposed = transposed;
  TORCH_CHECK(static_cast<int64_t>(p.stride.size()) == nsp && static_cast<int64_t>(p.padding.size()) == nsp &&
                  static_cast<int64_t>(p.dilation.size()) == nsp &&
                  static_cast<int64_t>(p.output_padding.size()) == nsp,
              ctx.op_name(), ": expected stride, padding, dilation and output_padding of length ", nsp);
  return p;
}

std::vector<Value> slow_conv(LowerCtx& ctx, int64_t nsp, bool transposed) {
  Value x = ctx.tensor("self"), w = ctx.tensor("weight");
  check_supported(ctx, x);
  TORCH_CHECK(x.rank() == nsp + 2 && w.rank() == nsp + 2, ctx.op_name(), ": expected ", nsp + 2,
              "-d input and weight, got ", x.rank(), "-d and ", w.rank(), "-d");
  TORCH_CHECK(x.element() == w.element(), "Input type (", ctx.dtype_of("self"), ") and weight type (",
              ctx.dtype_of("weight"), ") should be the same");
  auto k = ctx.ints_arg("kernel_size");
  for (int64_t i = 0; i < nsp && i < static_cast<int64_t>(k.size()); ++i)
    TORCH_CHECK(k[i] == w.dim(i + 2), ctx.op_name(), ": kernel_size ", k, " does not match weight of shape ",
                ctx.tensor_arg("weight").sizes());
  Params p = slow_params(ctx, nsp, transposed);
  int64_t cin = transposed ? w.dim(0) : w.dim(1);
  TORCH_CHECK(x.dim(1) == cin, ctx.op_name(), ": input of shape ", ctx.tensor_arg("self").sizes(),
              " does not match weight of shape ", ctx.tensor_arg("weight").sizes(), " (", cin, " input channels)");
  return {conv_with_bias(ctx, x, w, p)};
}

}  // namespace

TPU_LOWERING(_slow_conv2d_forward) { return slow_conv(ctx, 2, false); }
TPU_LOWERING(slow_conv3d_forward) { return slow_conv(ctx, 3, false); }
TPU_LOWERING(slow_conv_dilated2d) { return slow_conv(ctx, 2, false); }
TPU_LOWERING(slow_conv_dilated3d) { return slow_conv(ctx, 3, false); }
TPU_LOWERING(slow_conv_transpose2d) { return slow_conv(ctx, 2, true); }
TPU_LOWERING(slow_conv_transpose3d) { return slow_conv(ctx, 3, true); }

// _slow_conv2d_backward.output_mask(grad_output, self, weight, kernel_size,
// stride, padding, output_mask) -> (grad_input, grad_weight, grad_bias)
TPU_LOWERING(_slow_conv2d_backward) {
  Value gy = ctx.tensor("grad_output"), x = ctx.tensor("self"), w = ctx.tensor("weight");
  check_supported(ctx, x);
  Params p = slow_params(ctx, 2, false);
  std::vector<bool> mask{true, true, true};
  if (ctx.has("output_mask")) {
    auto m = ctx.arg("output_mask").toBoolList();
    for (size_t i = 0; i < 3 && i < m.size(); ++i) mask[i] = m.get(i);
  }
  ElementType orig = x.element(), acc = acc_type(orig);
  gy = hlo::convert(gy, acc);
  x = hlo::convert(x, acc);
  w = hlo::convert(w, acc);
  Builder& b = ctx.b();
  Dims xs = spatial(x);
  Value gi = mask[0] ? conv_transposed(gy, w, p, xs) : hlo::full(b, acc, x.dims(), 0);
  Value gw = mask[1] ? conv_weight_grad(x, gy, p, spatial(w)) : hlo::full(b, acc, w.dims(), 0);
  Value gb = mask[2] ? hlo::reduce(gy, {0, 2, 3}, hlo::ReduceKind::kSum) : hlo::full(b, acc, {w.dim(0)}, 0);
  return {hlo::convert(gi, orig), hlo::convert(gw, orig), hlo::convert(gb, orig)};
}

}  // namespace torch_tpu::lowering
