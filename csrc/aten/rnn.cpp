// aten::lstm / gru / rnn_tanh / rnn_relu (padded `.input` and packed
// `.data` forms) for tpu tensors. PyTorch's CompositeImplicitAutograd
// kernels would run them one time step at a time (a program per step and
// per op on tpu); here each layer and direction is one internal op,
// tpu_internal::_tpu_rnn_layer, whose time loop is a stablehlo.while
// (csrc/lowering/rnn.cpp), with an autograd node whose backward is one
// reverse-loop op, _tpu_rnn_layer_backward. Layers, directions, dropout
// between layers, batch_first and packing are composed here from ordinary
// ops (cat, stack, dropout, index_select), which autograd differentiates.
//
// The kernels are registered for AutogradPrivateUse1 (so they, not the
// composite, build the autograd graph) and for PrivateUse1 (reached under
// inference_mode, where autograd keys are skipped).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/FuncTorchTLS.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/gru_native.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/ops/rnn_relu_native.h>
#include <ATen/ops/rnn_tanh_native.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

enum Mode { kTanh = 0, kRelu = 1, kLstm = 2, kGru = 3 };

std::optional<at::Tensor> opt(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

using LayerOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

LayerOut call_layer(int64_t mode, const at::Tensor& x, const at::Tensor& hx, const at::Tensor& cx,
                    const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh,
                    const at::Tensor& w_hr, const at::Tensor& mask, bool reverse) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("tpu_internal::_tpu_rnn_layer", "")
                       .typed<LayerOut(int64_t, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                                       const std::optional<at::Tensor>&, bool)>();
  return op.call(mode, x, hx, opt(cx), w_ih, w_hh, opt(b_ih), opt(b_hh), opt(w_hr), opt(mask), reverse);
}

using LayerGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                              at::Tensor>;

LayerGrads call_layer_backward(int64_t mode, const at::Tensor& x, const at::Tensor& hx, const at::Tensor& cx,
                               const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& w_hr,
                               const at::Tensor& mask, bool reverse, const at::Tensor& acts, const at::Tensor& states,
                               const at::Tensor& cells, const at::Tensor& grad_output, const at::Tensor& grad_hy,
                               const at::Tensor& grad_cy) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("tpu_internal::_tpu_rnn_layer_backward", "")
          .typed<LayerGrads(int64_t, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                            const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                            const std::optional<at::Tensor>&, bool, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&)>();
  return op.call(mode, x, hx, opt(cx), w_ih, w_hh, opt(w_hr), opt(mask), reverse, acts, states, cells, grad_output,
                 grad_hy, opt(grad_cy));
}

// One layer and direction: (output [T, B, P], hy [B, P], cy [B, H]).
struct RnnLayerFn : public torch::autograd::Function<RnnLayerFn> {
  // Optional inputs are std::optional: autograd's custom Function records
  // an absent one as a non-tensor argument (an undefined at::Tensor would be
  // taken for a tensor input and rejected).
  static variable_list forward(AutogradContext* ctx, int64_t mode, bool reverse, const at::Tensor& x,
                               const at::Tensor& hx, const std::optional<at::Tensor>& cx, const at::Tensor& w_ih,
                               const at::Tensor& w_hh, const std::optional<at::Tensor>& b_ih,
                               const std::optional<at::Tensor>& b_hh, const std::optional<at::Tensor>& w_hr,
                               const std::optional<at::Tensor>& mask) {
    auto v = [](const std::optional<at::Tensor>& t) { return t ? *t : at::Tensor(); };
    auto [out, hy, cy, acts, states, cells] =
        call_layer(mode, x, hx, v(cx), w_ih, w_hh, v(b_ih), v(b_hh), v(w_hr), v(mask), reverse);
    ctx->saved_data["mode"] = mode;
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["has_bias"] = b_ih.has_value();
    ctx->save_for_backward({x, hx, v(cx), w_ih, w_hh, v(w_hr), v(mask), acts, states, cells});
    return {out, hy, cy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    int64_t mode = ctx->saved_data["mode"].toInt();
    bool reverse = ctx->saved_data["reverse"].toBool();
    bool has_bias = ctx->saved_data["has_bias"].toBool();
    auto s = ctx->get_saved_variables();
    // Undefined output gradients arrive as zeros (materialize_grads).
    auto [dx, dhx, dcx, dwih, dwhh, dbih, dbhh, dwhr] =
        call_layer_backward(mode, s[0], s[1], s[2], s[3], s[4], s[5], s[6], reverse, s[7], s[8], s[9], grads[0],
                            grads[1], mode == kLstm ? grads[2] : at::Tensor());
    at::Tensor none;
    return {none, none, dx, dhx, mode == kLstm ? dcx : none, dwih, dwhh, has_bias ? dbih : none,
            has_bias ? dbhh : none, s[5].defined() ? dwhr : none, none};
  }
};

struct Packing {
  at::Tensor mask;        // [T, B] bool on the device, undefined when not packed
  at::Tensor to_padded;   // [T * B] rows of the packed data (0 for padding)
  at::Tensor to_packed;   // [N] rows of the padded [T * B] output
  int64_t T = 0, B = 0;
};

Packing packing_of(const at::Tensor& batch_sizes, const at::Device& device) {
  TORCH_CHECK(batch_sizes.device().is_cpu() && batch_sizes.dim() == 1,
              "torch_tpu: packed RNN input expects batch_sizes as a 1-D CPU tensor, got ", batch_sizes.sizes(), " on ",
              batch_sizes.device());
  at::Tensor bs = batch_sizes.to(at::kLong).contiguous();
  const int64_t* v = bs.data_ptr<int64_t>();
  Packing p;
  p.T = bs.numel();
  TORCH_CHECK(p.T > 0, "torch_tpu: packed RNN input with no time steps");
  p.B = v[0];
  std::vector<int64_t> pad(p.T * p.B, 0), packed;
  std::vector<uint8_t> mask(p.T * p.B, 0);
  int64_t off = 0;
  for (int64_t t = 0; t < p.T; ++t) {
    TORCH_CHECK(v[t] <= p.B && v[t] >= 0 && (t == 0 || v[t] <= v[t - 1]),
                "torch_tpu: packed RNN batch_sizes must be non-increasing, got ", batch_sizes);
    for (int64_t b = 0; b < v[t]; ++b) {
      pad[t * p.B + b] = off + b;
      mask[t * p.B + b] = 1;
      packed.push_back(t * p.B + b);
    }
    off += v[t];
  }
  auto up = [&](const std::vector<int64_t>& x) {
    return at::tensor(x, at::TensorOptions().dtype(at::kLong)).to(device);
  };
  p.to_padded = up(pad);
  p.to_packed = up(packed);
  p.mask = at::tensor(std::vector<int64_t>(mask.begin(), mask.end()), at::TensorOptions().dtype(at::kLong))
               .to(at::kBool)
               .reshape({p.T, p.B})
               .to(device);
  return p;
}

// Layers and directions over x [T, B, I]: (output [T, B, D * P], hy, cy).
std::tuple<at::Tensor, at::Tensor, at::Tensor> run_stack(int64_t mode, const at::Tensor& x, const at::Tensor& hx,
                                                         const at::Tensor& cx, at::TensorList params, bool has_biases,
                                                         int64_t num_layers, double dropout, bool train,
                                                         bool bidirectional, const at::Tensor& mask) {
  int64_t D = bidirectional ? 2 : 1;
  TORCH_CHECK(num_layers >= 1 && params.size() % (num_layers * D) == 0,
              "torch_tpu: RNN expects a multiple of num_layers * directions weights, got ", params.size());
  size_t per = params.size() / (num_layers * D);
  size_t base_count = has_biases ? 4 : 2;
  bool proj = mode == kLstm && per == base_count + 1;
  TORCH_CHECK(per == base_count || proj, "torch_tpu: RNN got ", per, " weights per layer, expected ", base_count);
  at::Tensor layer_in = x;
  std::vector<at::Tensor> hys, cys;
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<at::Tensor> outs;
    for (int64_t d = 0; d < D; ++d) {
      int64_t idx = l * D + d;
      size_t b = idx * per;
      using OT = std::optional<at::Tensor>;
      OT none;
      auto r = RnnLayerFn::apply(mode, d == 1, layer_in, hx.select(0, idx),
                                 mode == kLstm ? OT(cx.select(0, idx)) : none, params[b], params[b + 1],
                                 has_biases ? OT(params[b + 2]) : none, has_biases ? OT(params[b + 3]) : none,
                                 proj ? OT(params[b + per - 1]) : none, opt(mask));
      outs.push_back(r[0]);
      hys.push_back(r[1]);
      if (mode == kLstm) cys.push_back(r[2]);
    }
    layer_in = D == 2 ? at::cat(outs, 2) : outs[0];
    if (dropout > 0 && train && l + 1 < num_layers) layer_in = at::dropout(layer_in, dropout, train);
  }
  return {layer_in, at::stack(hys, 0), mode == kLstm ? at::stack(cys, 0) : at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> run_padded(int64_t mode, const at::Tensor& input, const at::Tensor& hx,
                                                          const at::Tensor& cx, at::TensorList params, bool has_biases,
                                                          int64_t num_layers, double dropout, bool train,
                                                          bool bidirectional, bool batch_first) {
  TORCH_CHECK(input.dim() == 3, "torch_tpu: RNN expects a 3-D input, got ", input.sizes());
  at::Tensor x = batch_first ? input.transpose(0, 1) : input;
  auto [out, hy, cy] = run_stack(mode, x, hx, cx, params, has_biases, num_layers, dropout, train, bidirectional, {});
  return {batch_first ? out.transpose(0, 1) : out, hy, cy};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> run_packed(int64_t mode, const at::Tensor& data,
                                                          const at::Tensor& batch_sizes, const at::Tensor& hx,
                                                          const at::Tensor& cx, at::TensorList params, bool has_biases,
                                                          int64_t num_layers, double dropout, bool train,
                                                          bool bidirectional) {
  TORCH_CHECK(data.dim() == 2, "torch_tpu: packed RNN data must be 2-D, got ", data.sizes());
  Packing p = packing_of(batch_sizes, data.device());
  at::Tensor x = data.index_select(0, p.to_padded).view({p.T, p.B, data.size(1)});
  auto [out, hy, cy] = run_stack(mode, x, hx, cx, params, has_biases, num_layers, dropout, train, bidirectional, p.mask);
  return {out.reshape({p.T * p.B, out.size(2)}).index_select(0, p.to_packed), hy, cy};
}

// Under a torch.func transform (grad, jvp, jacrev, ...) a C++ autograd
// Function is refused, so the layer op cannot be used: PyTorch's own
// composite runs instead, one cell op per step, which functorch
// differentiates (the speed of PyTorch's per-step path, CPU's answers).
// The test is the one that Function::apply makes (it throws when a
// transform is active); functorch's own layer stack header is not usable
// from an extension.
bool under_functorch() {
  const auto& tls = at::functorch::functorchTLSAccessor();
  if (!tls) return false;
  try {
    tls->checkSupportsCppAutogradFunction();
    return false;
  } catch (const c10::Error&) {
    return true;
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_input(const at::Tensor& input, at::TensorList hx,
                                                          at::TensorList params, bool has_biases, int64_t num_layers,
                                                          double dropout, bool train, bool bidirectional,
                                                          bool batch_first) {
  if (under_functorch())
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  TORCH_CHECK(hx.size() == 2, "torch_tpu: lstm expects two hidden states (h0, c0), got ", hx.size());
  return run_padded(kLstm, input, hx[0], hx[1], params, has_biases, num_layers, dropout, train, bidirectional,
                    batch_first);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_data(const at::Tensor& data, const at::Tensor& batch_sizes,
                                                         at::TensorList hx, at::TensorList params, bool has_biases,
                                                         int64_t num_layers, double dropout, bool train,
                                                         bool bidirectional) {
  if (under_functorch())
    return at::native::lstm(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional);
  TORCH_CHECK(hx.size() == 2, "torch_tpu: lstm expects two hidden states (h0, c0), got ", hx.size());
  return run_packed(kLstm, data, batch_sizes, hx[0], hx[1], params, has_biases, num_layers, dropout, train,
                    bidirectional);
}

// PyTorch's composite GRU / tanh RNN / relu RNN (either overload: padded
// input or packed data), for under_functorch().
template <int64_t M, typename... Args>
std::tuple<at::Tensor, at::Tensor> composite(const Args&... args) {
  if constexpr (M == kGru)
    return at::native::gru(args...);
  else if constexpr (M == kTanh)
    return at::native::rnn_tanh(args...);
  else
    return at::native::rnn_relu(args...);
}

template <int64_t M>
std::tuple<at::Tensor, at::Tensor> simple_input(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                                bool has_biases, int64_t num_layers, double dropout, bool train,
                                                bool bidirectional, bool batch_first) {
  if (under_functorch())
    return composite<M>(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  auto [out, hy, cy] = run_padded(M, input, hx, {}, params, has_biases, num_layers, dropout, train, bidirectional,
                                  batch_first);
  return {out, hy};
}

template <int64_t M>
std::tuple<at::Tensor, at::Tensor> simple_data(const at::Tensor& data, const at::Tensor& batch_sizes,
                                               const at::Tensor& hx, at::TensorList params, bool has_biases,
                                               int64_t num_layers, double dropout, bool train, bool bidirectional) {
  if (under_functorch())
    return composite<M>(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional);
  auto [out, hy, cy] =
      run_packed(M, data, batch_sizes, hx, {}, params, has_biases, num_layers, dropout, train, bidirectional);
  return {out, hy};
}

// _thnn_fused_lstm_cell / _thnn_fused_gru_cell without biases: PyTorch's
// meta kernel (rnn_cell_checkSizes) reads `.device` of the absent biases
// and fails, so absent biases are passed to the engine as zeros (the same
// result; autograd above this kernel still sees them absent, so no bias
// gradient is asked for).
void fused_cell_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // input_gates, hidden_gates, cx/hx, input_bias, hidden_bias (absent: None or
  // an undefined tensor, which is how at::lstm_cell passes them)
  auto& s = *stack;
  size_t base = s.size() - 5;
  const at::Tensor& gates = s[base].toTensor();
  for (size_t i = 3; i < 5; ++i)
    if (s[base + i].isNone() || !s[base + i].toTensor().defined()) s[base + i] = at::zeros({gates.size(-1)}, gates.options());
  exec::run_lowered_op(op, stack);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(tpu_internal, m) {
  m.def(
      "_tpu_rnn_layer(int mode, Tensor input, Tensor hx, Tensor? cx, Tensor w_ih, Tensor w_hh, Tensor? b_ih, "
      "Tensor? b_hh, Tensor? w_hr, Tensor? mask, bool reverse) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "_tpu_rnn_layer_backward(int mode, Tensor input, Tensor hx, Tensor? cx, Tensor w_ih, Tensor w_hh, "
      "Tensor? w_hr, Tensor? mask, bool reverse, Tensor acts, Tensor states, Tensor cells, Tensor grad_output, "
      "Tensor grad_hy, Tensor? grad_cy) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
}

// The layer's backward is not itself differentiable. Without an autograd
// kernel its results would count as constants in a double backward
// (create_graph=True), silently giving zero second-order gradients; with
// this one, differentiating them raises "derivative for ... is not
// implemented", as cuDNN's RNN backward does on CUDA.
TORCH_LIBRARY_IMPL(tpu_internal, Autograd, m) {
  m.impl("_tpu_rnn_layer", torch::autograd::autogradNotImplementedFallback());
  m.impl("_tpu_rnn_layer_backward", torch::autograd::autogradNotImplementedFallback());
}

#define TPU_RNN_KERNELS(m)                                        \
  m.impl("lstm.input", &lstm_input);                              \
  m.impl("lstm.data", &lstm_data);                                \
  m.impl("gru.input", &simple_input<kGru>);                       \
  m.impl("gru.data", &simple_data<kGru>);                         \
  m.impl("rnn_tanh.input", &simple_input<kTanh>);                 \
  m.impl("rnn_tanh.data", &simple_data<kTanh>);                   \
  m.impl("rnn_relu.input", &simple_input<kRelu>);                 \
  m.impl("rnn_relu.data", &simple_data<kRelu>)

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { TPU_RNN_KERNELS(m); }
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  TPU_RNN_KERNELS(m);
  m.impl("_thnn_fused_lstm_cell", torch::CppFunction::makeFromBoxedFunction<&fused_cell_boxed>());
  m.impl("_thnn_fused_gru_cell", torch::CppFunction::makeFromBoxedFunction<&fused_cell_boxed>());
}

}  // namespace torch_tpu::aten
