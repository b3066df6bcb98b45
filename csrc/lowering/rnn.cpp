// Recurrent layers: one layer and direction of RNN_TANH / RNN_RELU / LSTM /
// GRU over a whole sequence as one program whose time loop is a
// stablehlo.while (program size does not grow with the sequence length),
// its backward as a reverse while loop, and the single-step fused cells
// PyTorch calls for non-CPU devices (_thnn_fused_lstm_cell,
// _thnn_fused_gru_cell and their backwards).
//
// tpu_internal::_tpu_rnn_layer / _tpu_rnn_layer_backward are internal ops
// (schemas and the autograd glue in csrc/aten/rnn.cpp, which composes the
// layers, directions, dropout and packing of aten::lstm & co. from them).
// Layout is time-major: input [T, B, I], states [B, P] (P = proj_size or
// hidden size H), cells [B, H]. Gate order is PyTorch's: LSTM i, f, g, o;
// GRU r, z, n. An optional `mask` [T, B] (packed sequences) freezes the
// state of rows that are not active at a step and zeroes their output, which
// is what CPU's packed path computes: a forward direction keeps each
// sequence's last state, a reverse one starts each sequence from hx.
//
// The input projection x · W_ihᵀ is one matmul over all steps outside the
// loop; the backward loop only carries (dh, dc) and writes each step's gate
// gradients, and every weight gradient is one contraction over [T, B] after
// it. bf16/f16 are computed in f32 and rounded at the end (CPU's cells
// compute in the input type; the difference is within bf16 rounding).
#include "lowering/precision.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

enum Mode { kTanh = 0, kRelu = 1, kLstm = 2, kGru = 3 };

int64_t gates_of(int64_t mode) { return mode == kLstm ? 4 : mode == kGru ? 3 : 1; }

ElementType compute_type(at::ScalarType t) {
  return (t == at::kBFloat16 || t == at::kHalf) ? ElementType::kF32 : element_type(t);
}

Value ci64(Builder& b, int64_t v) { return hlo::constant_int(b, ElementType::kI64, v); }

// a [.., K] · b where b is [N, K] (contract the last dims): a · bᵀ.
Value mm_t(Value a, Value w) {
  return matmul_dot(a, w, {{}, {}, {a.rank() - 1}, {1}}, a.element());
}
// a [B, N] · w [N, K].
Value mm(Value a, Value w) { return matmul_dot(a, w, {{}, {}, {1}, {0}}, a.element()); }
// Σ over [T, B] of aᵀ b: a [T, B, N], b [T, B, K] -> [N, K].
Value outer_sum(Value a, Value b) { return matmul_dot(a, b, {{}, {}, {0, 1}, {0, 1}}, a.element()); }

Value sigmoid(Value x) { return hlo::unary("logistic", x); }
Value tanh_(Value x) { return hlo::unary("tanh", x); }
Value one_minus(Value x) { return hlo::sub(hlo::full_like(x, 1), x); }
// x[:, j*h : (j+1)*h] of a [B, G*h] value.
Value chunk(Value x, int64_t j, int64_t h) { return hlo::slice(x, {0, j * h}, {x.dim(0), (j + 1) * h}); }

Value at_step(Value buf, Value t) {
  Builder& b = buf.builder();
  Value z = ci64(b, 0);
  return hlo::reshape(hlo::dynamic_slice(buf, {t, z, z}, {1, buf.dim(1), buf.dim(2)}), {buf.dim(1), buf.dim(2)});
}
Value put_step(Value buf, Value v, Value t) {
  Builder& b = buf.builder();
  Value z = ci64(b, 0);
  return hlo::dynamic_update_slice(buf, hlo::reshape(v, {1, v.dim(0), v.dim(1)}), {t, z, z});
}
// Row mask [B] of step t broadcast to [B, n].
Value mask_rows(Value mask, Value t, int64_t n) {
  Builder& b = mask.builder();
  Value m = hlo::reshape(hlo::dynamic_slice(mask, {t, ci64(b, 0)}, {1, mask.dim(1)}), {mask.dim(1)});
  return hlo::broadcast_in_dim(m, {mask.dim(1), n}, {0});
}

struct Layer {
  int64_t mode, T, B, I, H, P, G;
  bool reverse, masked, proj;
  ElementType e, out_e;
};

Layer layer_setup(LowerCtx& ctx) {
  Layer k;
  k.mode = ctx.int_arg("mode");
  const at::Tensor& x = ctx.tensor_arg("input");
  const at::Tensor& whh = ctx.tensor_arg("w_hh");
  TORCH_CHECK(x.dim() == 3, ctx.op_name(), ": expected a [T, B, I] input, got ", x.sizes());
  k.T = x.size(0);
  k.B = x.size(1);
  k.I = x.size(2);
  k.G = gates_of(k.mode);
  k.H = whh.size(0) / k.G;
  k.P = whh.size(1);
  k.proj = !ctx.is_none("w_hr");
  k.reverse = ctx.bool_arg("reverse");
  k.masked = !ctx.is_none("mask");
  k.e = compute_type(x.scalar_type());
  k.out_e = element_type(x.scalar_type());
  return k;
}

// t for step s: s, or T - 1 - s for the reverse direction.
Value time_of(Builder& b, const Layer& k, Value s) { return k.reverse ? hlo::sub(ci64(b, k.T - 1), s) : s; }

Value input_of(LowerCtx& ctx, const Layer& k, const char* name) {
  return hlo::convert(ctx.tensor(name), k.e);
}
Value mask_of(LowerCtx& ctx, const Layer& k) {
  if (!k.masked) return hlo::full(ctx.b(), ElementType::kPred, {k.T, k.B}, 1);
  Value m = ctx.tensor("mask");
  return m.element() == ElementType::kPred ? m : hlo::compare(m, hlo::zeros_like(m), "NE");
}

// The states before each step, [T, B, n]: hx at the first step processed,
// then the state the previous step left.
Value previous_states(const Layer& k, Value states, Value h0) {
  int64_t n = h0.dim(1);
  Value first = hlo::reshape(h0, {1, k.B, n});
  if (k.T == 1) return first;
  if (!k.reverse) return hlo::concatenate({first, hlo::slice(states, {0, 0, 0}, {k.T - 1, k.B, n})}, 0);
  return hlo::concatenate({hlo::slice(states, {1, 0, 0}, {k.T, k.B, n}), first}, 0);
}

}  // namespace

// _tpu_rnn_layer(mode, input, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr, mask,
// reverse) -> (output, hy, cy, acts, states, cells).
// acts: activated gates per step; states: the state after each step; cells:
// LSTM's cell state after each step, GRU's W_hn·h + b_hn (its backward needs
// it), empty for plain RNNs.
TPU_LOWERING(_tpu_rnn_layer) {
  Builder& b = ctx.b();
  Layer k = layer_setup(ctx);
  Value x = input_of(ctx, k, "input"), h0 = input_of(ctx, k, "hx");
  Value wih = input_of(ctx, k, "w_ih"), whh = input_of(ctx, k, "w_hh");
  int64_t GH = k.G * k.H;
  Value gx = mm_t(x, wih);  // [T, B, G*H]
  Value bhh = hlo::full(b, k.e, {k.B, GH}, 0);
  if (!ctx.is_none("b_ih")) gx = hlo::add(gx, hlo::broadcast_in_dim(input_of(ctx, k, "b_ih"), gx.dims(), {2}));
  if (!ctx.is_none("b_hh")) {
    Value bias = input_of(ctx, k, "b_hh");
    // GRU's hidden bias of the n gate sits inside r * (W_hn h + b_hn).
    if (k.mode == kGru)
      bhh = hlo::broadcast_in_dim(bias, {k.B, GH}, {1});
    else
      gx = hlo::add(gx, hlo::broadcast_in_dim(bias, gx.dims(), {2}));
  }
  Value c0 = k.mode == kLstm ? input_of(ctx, k, "cx") : hlo::full(b, k.e, {k.B, k.H}, 0);
  Value whr = k.proj ? input_of(ctx, k, "w_hr") : hlo::full(b, k.e, {1, 1}, 0);
  Value mask = mask_of(ctx, k);
  int64_t na = k.mode == kLstm || k.mode == kGru ? GH : 1;
  int64_t nc = k.mode == kLstm || k.mode == kGru ? k.H : 1;
  Value outs = hlo::full(b, k.e, {k.T, k.B, k.P}, 0), states = outs;
  Value acts = hlo::full(b, k.e, {k.T, k.B, na}, 0), cells = hlo::full(b, k.e, {k.T, k.B, nc}, 0);
  int64_t H = k.H;
  auto res = hlo::while_loop(
      {ci64(b, 0), h0, c0, outs, states, acts, cells, gx, whh, bhh, whr, mask},
      [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci64(b, k.T), "LT"); },
      [&](const std::vector<Value>& s) {
        Value step = s[0], h = s[1], c = s[2], outs = s[3], states = s[4], acts = s[5], cells = s[6];
        Value gx = s[7], whh = s[8], bhh = s[9], whr = s[10], mask = s[11];
        Value t = time_of(b, k, step);
        Value g = at_step(gx, t);
        Value hn, cn = c, act, aux;
        if (k.mode == kLstm) {
          g = hlo::add(g, mm_t(h, whh));
          Value i = sigmoid(chunk(g, 0, H)), f = sigmoid(chunk(g, 1, H)), gg = tanh_(chunk(g, 2, H)),
                o = sigmoid(chunk(g, 3, H));
          cn = hlo::add(hlo::mul(f, c), hlo::mul(i, gg));
          hn = hlo::mul(o, tanh_(cn));
          if (k.proj) hn = mm_t(hn, whr);
          act = hlo::concatenate({i, f, gg, o}, 1);
          aux = cn;
        } else if (k.mode == kGru) {
          Value gh = hlo::add(mm_t(h, whh), bhh);
          Value r = sigmoid(hlo::add(chunk(g, 0, H), chunk(gh, 0, H)));
          Value z = sigmoid(hlo::add(chunk(g, 1, H), chunk(gh, 1, H)));
          Value n = tanh_(hlo::add(chunk(g, 2, H), hlo::mul(r, chunk(gh, 2, H))));
          hn = hlo::add(n, hlo::mul(z, hlo::sub(h, n)));
          act = hlo::concatenate({r, z, n}, 1);
          aux = chunk(gh, 2, H);
        } else {
          Value a = hlo::add(g, mm_t(h, whh));
          hn = k.mode == kTanh ? tanh_(a) : hlo::max(a, hlo::zeros_like(a));
          act = hlo::full(b, k.e, {k.B, 1}, 0);
          aux = act;
        }
        Value out = hn;
        if (k.masked) {
          Value mp = mask_rows(mask, t, k.P);
          out = hlo::select(mp, hn, hlo::zeros_like(hn));
          hn = hlo::select(mp, hn, h);
          if (k.mode == kLstm) cn = hlo::select(mask_rows(mask, t, H), cn, c);
        }
        if (k.mode == kLstm) aux = cn;
        return std::vector<Value>{hlo::add(step, ci64(b, 1)), hn, cn,
                                  put_step(outs, out, t), put_step(states, hn, t), put_step(acts, act, t),
                                  put_step(cells, aux, t), gx, whh, bhh, whr, mask};
      });
  Value cy = k.mode == kLstm ? hlo::convert(res[2], k.out_e) : hlo::full(b, k.out_e, {0}, 0);
  return {hlo::convert(res[3], k.out_e), hlo::convert(res[1], k.out_e), cy, res[5], res[4], res[6]};
}

// _tpu_rnn_layer_backward(mode, input, hx, cx, w_ih, w_hh, w_hr, mask,
// reverse, acts, states, cells, grad_output, grad_hy, grad_cy)
// -> (grad_input, grad_hx, grad_cx, grad_w_ih, grad_w_hh, grad_b_ih,
//     grad_b_hh, grad_w_hr)
TPU_LOWERING(_tpu_rnn_layer_backward) {
  Builder& b = ctx.b();
  Layer k = layer_setup(ctx);
  int64_t GH = k.G * k.H, H = k.H;
  Value x = input_of(ctx, k, "input"), h0 = input_of(ctx, k, "hx");
  Value wih = input_of(ctx, k, "w_ih"), whh = input_of(ctx, k, "w_hh");
  Value acts = input_of(ctx, k, "acts"), states = input_of(ctx, k, "states"), cells = input_of(ctx, k, "cells");
  Value gout = input_of(ctx, k, "grad_output"), dhy = input_of(ctx, k, "grad_hy");
  Value c0 = k.mode == kLstm ? input_of(ctx, k, "cx") : hlo::full(b, k.e, {k.B, H}, 0);
  Value dcy = k.mode == kLstm && !ctx.is_none("grad_cy") ? input_of(ctx, k, "grad_cy") : hlo::full(b, k.e, {k.B, H}, 0);
  Value whr = k.proj ? input_of(ctx, k, "w_hr") : hlo::full(b, k.e, {1, 1}, 0);
  Value mask = mask_of(ctx, k);
  Value hprev = previous_states(k, states, h0);
  Value cprev = k.mode == kLstm ? previous_states(k, cells, c0) : hlo::full(b, k.e, {1, 1, 1}, 0);
  Value dg = hlo::full(b, k.e, {k.T, k.B, GH}, 0);
  Value dgh = k.mode == kGru ? dg : hlo::full(b, k.e, {1, 1, 1}, 0);
  Value dhn_buf = k.proj ? hlo::full(b, k.e, {k.T, k.B, k.P}, 0) : hlo::full(b, k.e, {1, 1, 1}, 0);
  auto res = hlo::while_loop(
      {ci64(b, k.T - 1), dhy, dcy, dg, dgh, dhn_buf, gout, acts, states, cells, hprev, cprev, whh, whr, mask},
      [&](const std::vector<Value>& s) { return hlo::compare(s[0], ci64(b, 0), "GE"); },
      [&](const std::vector<Value>& s) {
        Value step = s[0], dh = s[1], dc = s[2], dg = s[3], dgh = s[4], dhn_buf = s[5];
        Value gout = s[6], acts = s[7], states = s[8], cells = s[9], hprev = s[10], cprev = s[11];
        Value whh = s[12], whr = s[13], mask = s[14];
        Value t = time_of(b, k, step);
        Value zp = hlo::full(b, k.e, {k.B, k.P}, 0);
        Value mp = mask_rows(mask, t, k.P);
        // The output was select(m, h', 0) and the state select(m, h', h).
        Value dtot = hlo::add(dh, hlo::select(mp, at_step(gout, t), zp));
        Value dhn = hlo::select(mp, dtot, zp);
        Value pass_h = hlo::select(mp, zp, dtot);
        Value dh_prev, dc_prev = dc, dgx, dghh;
        if (k.mode == kLstm) {
          Value a = at_step(acts, t);
          Value i = chunk(a, 0, H), f = chunk(a, 1, H), gg = chunk(a, 2, H), o = chunk(a, 3, H);
          Value cn = at_step(cells, t), cp = at_step(cprev, t);
          Value dhr = dhn;
          if (k.proj) {
            dhn_buf = put_step(dhn_buf, dhn, t);
            dhr = mm(dhn, whr);
          }
          Value mh = mask_rows(mask, t, H), zh = hlo::full(b, k.e, {k.B, H}, 0);
          Value tc = tanh_(cn);
          Value dcn = hlo::add(hlo::select(mh, dc, zh), hlo::mul(hlo::mul(dhr, o), one_minus(hlo::mul(tc, tc))));
          Value d_o = hlo::mul(dhr, tc), di = hlo::mul(dcn, gg), dgg = hlo::mul(dcn, i), df = hlo::mul(dcn, cp);
          dc_prev = hlo::add(hlo::mul(dcn, f), hlo::select(mh, zh, dc));
          dgx = hlo::concatenate({hlo::mul(di, hlo::mul(i, one_minus(i))), hlo::mul(df, hlo::mul(f, one_minus(f))),
                                  hlo::mul(dgg, one_minus(hlo::mul(gg, gg))), hlo::mul(d_o, hlo::mul(o, one_minus(o)))},
                                 1);
          dghh = dgx;
          dh_prev = hlo::add(mm(dgx, whh), pass_h);
        } else if (k.mode == kGru) {
          Value a = at_step(acts, t);
          Value r = chunk(a, 0, H), z = chunk(a, 1, H), n = chunk(a, 2, H);
          Value ghn = at_step(cells, t), hp = at_step(hprev, t);
          Value dn = hlo::mul(dhn, one_minus(z)), dz = hlo::mul(dhn, hlo::sub(hp, n));
          Value dan = hlo::mul(dn, one_minus(hlo::mul(n, n)));
          Value dar = hlo::mul(hlo::mul(dan, ghn), hlo::mul(r, one_minus(r)));
          Value daz = hlo::mul(dz, hlo::mul(z, one_minus(z)));
          dgx = hlo::concatenate({dar, daz, dan}, 1);
          dghh = hlo::concatenate({dar, daz, hlo::mul(dan, r)}, 1);
          dgh = put_step(dgh, dghh, t);
          dh_prev = hlo::add(hlo::add(mm(dghh, whh), hlo::mul(dhn, z)), pass_h);
        } else {
          Value hn = at_step(states, t);
          Value d = k.mode == kTanh ? one_minus(hlo::mul(hn, hn))
                                    : hlo::convert(hlo::compare(hn, hlo::zeros_like(hn), "GT"), k.e);
          dgx = hlo::mul(dhn, d);
          dghh = dgx;
          dh_prev = hlo::add(mm(dgx, whh), pass_h);
        }
        return std::vector<Value>{hlo::sub(step, ci64(b, 1)), dh_prev, dc_prev, put_step(dg, dgx, t), dgh, dhn_buf,
                                  gout, acts, states, cells, hprev, cprev, whh, whr, mask};
      });
  Value dG = res[3], dGH = k.mode == kGru ? res[4] : res[3];
  Value dx = matmul_dot(dG, wih, {{}, {}, {2}, {0}}, k.e);  // [T, B, I]
  Value dwih = outer_sum(dG, x), dwhh = outer_sum(dGH, hprev);
  Value dbih = hlo::reduce(dG, {0, 1}, hlo::ReduceKind::kSum), dbhh = hlo::reduce(dGH, {0, 1}, hlo::ReduceKind::kSum);
  Value dwhr = hlo::full(b, k.out_e, {0}, 0);
  if (k.proj) {
    Value o = hlo::slice(acts, {0, 0, 3 * H}, {k.T, k.B, 4 * H});
    Value hr = hlo::mul(o, tanh_(cells));
    dwhr = hlo::convert(outer_sum(res[5], hr), k.out_e);
  }
  Value dcx = k.mode == kLstm ? hlo::convert(res[2], k.out_e) : hlo::full(b, k.out_e, {0}, 0);
  auto out = [&](Value v) { return hlo::convert(v, k.out_e); };
  return {out(dx), out(res[1]), dcx, out(dwih), out(dwhh), out(dbih), out(dbhh), dwhr};
}

// ---- single-step fused cells (LSTMCell / GRUCell and PyTorch's non-CPU RNN path)

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias,
// hidden_bias) -> (hy, cy, workspace); workspace holds the activated gates
// (i, f, g, o), as CUDA's does.
TPU_LOWERING(_thnn_fused_lstm_cell) {
  at::ScalarType st = ctx.tensor_arg("input_gates").scalar_type();
  ElementType e = compute_type(st), oe = element_type(st);
  Value g = hlo::add(hlo::convert(ctx.tensor("input_gates"), e), hlo::convert(ctx.tensor("hidden_gates"), e));
  for (const char* bias : {"input_bias", "hidden_bias"})
    if (!ctx.is_none(bias)) g = hlo::add(g, hlo::broadcast_in_dim(hlo::convert(ctx.tensor(bias), e), g.dims(), {1}));
  Value c = hlo::convert(ctx.tensor("cx"), e);
  int64_t H = c.dim(1);
  TORCH_CHECK(g.rank() == 2 && g.dim(1) == 4 * H, ctx.op_name(), ": expected gates of shape [B, ", 4 * H, "], got ",
              g.dims());
  Value i = sigmoid(chunk(g, 0, H)), f = sigmoid(chunk(g, 1, H)), gg = tanh_(chunk(g, 2, H)),
        o = sigmoid(chunk(g, 3, H));
  Value cy = hlo::add(hlo::mul(f, c), hlo::mul(i, gg));
  Value hy = hlo::mul(o, tanh_(cy));
  return {hlo::convert(hy, oe), hlo::convert(cy, oe), hlo::convert(hlo::concatenate({i, f, gg, o}, 1), oe)};
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace,
// has_bias) -> (grad_gates, grad_cx, grad_bias)
TPU_LOWERING(_thnn_fused_lstm_cell_backward_impl) {
  at::ScalarType st = ctx.tensor_arg("cx").scalar_type();
  ElementType e = compute_type(st), oe = element_type(st);
  Value c = hlo::convert(ctx.tensor("cx"), e), cy = hlo::convert(ctx.tensor("cy"), e);
  Value a = hlo::convert(ctx.tensor("workspace"), e);
  int64_t H = c.dim(1);
  Value dh = ctx.is_none("grad_hy") ? hlo::zeros_like(c) : hlo::convert(ctx.tensor("grad_hy"), e);
  Value dc = ctx.is_none("grad_cy") ? hlo::zeros_like(c) : hlo::convert(ctx.tensor("grad_cy"), e);
  Value i = chunk(a, 0, H), f = chunk(a, 1, H), gg = chunk(a, 2, H), o = chunk(a, 3, H);
  Value tc = tanh_(cy);
  Value dcn = hlo::add(dc, hlo::mul(hlo::mul(dh, o), one_minus(hlo::mul(tc, tc))));
  Value dgates = hlo::concatenate(
      {hlo::mul(hlo::mul(dcn, gg), hlo::mul(i, one_minus(i))), hlo::mul(hlo::mul(dcn, c), hlo::mul(f, one_minus(f))),
       hlo::mul(hlo::mul(dcn, i), one_minus(hlo::mul(gg, gg))), hlo::mul(hlo::mul(dh, tc), hlo::mul(o, one_minus(o)))},
      1);
  Value dbias = hlo::reduce(dgates, {0}, hlo::ReduceKind::kSum);
  return {hlo::convert(dgates, oe), hlo::convert(hlo::mul(dcn, f), oe), hlo::convert(dbias, oe)};
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias,
// hidden_bias) -> (hy, workspace); workspace is (r, z, n, hx, W_hn·h + b_hn)
// as CUDA's.
TPU_LOWERING(_thnn_fused_gru_cell) {
  at::ScalarType st = ctx.tensor_arg("hx").scalar_type();
  ElementType e = compute_type(st), oe = element_type(st);
  Value gi = hlo::convert(ctx.tensor("input_gates"), e), gh = hlo::convert(ctx.tensor("hidden_gates"), e);
  if (!ctx.is_none("input_bias"))
    gi = hlo::add(gi, hlo::broadcast_in_dim(hlo::convert(ctx.tensor("input_bias"), e), gi.dims(), {1}));
  if (!ctx.is_none("hidden_bias"))
    gh = hlo::add(gh, hlo::broadcast_in_dim(hlo::convert(ctx.tensor("hidden_bias"), e), gh.dims(), {1}));
  Value h = hlo::convert(ctx.tensor("hx"), e);
  int64_t H = h.dim(1);
  TORCH_CHECK(gi.rank() == 2 && gi.dim(1) == 3 * H && gh.dims() == gi.dims(), ctx.op_name(),
              ": expected gates of shape [B, ", 3 * H, "], got ", gi.dims(), " and ", gh.dims());
  Value r = sigmoid(hlo::add(chunk(gi, 0, H), chunk(gh, 0, H)));
  Value z = sigmoid(hlo::add(chunk(gi, 1, H), chunk(gh, 1, H)));
  Value hn = chunk(gh, 2, H);
  Value n = tanh_(hlo::add(chunk(gi, 2, H), hlo::mul(r, hn)));
  Value hy = hlo::add(n, hlo::mul(z, hlo::sub(h, n)));
  return {hlo::convert(hy, oe), hlo::convert(hlo::concatenate({r, z, n, h, hn}, 1), oe)};
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
// -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
//     grad_hidden_bias)
TPU_LOWERING(_thnn_fused_gru_cell_backward) {
  at::ScalarType st = ctx.tensor_arg("workspace").scalar_type();
  ElementType e = compute_type(st), oe = element_type(st);
  Value w = hlo::convert(ctx.tensor("workspace"), e), dh = hlo::convert(ctx.tensor("grad_hy"), e);
  int64_t H = dh.dim(1);
  Value r = chunk(w, 0, H), z = chunk(w, 1, H), n = chunk(w, 2, H), h = chunk(w, 3, H), hn = chunk(w, 4, H);
  Value dn = hlo::mul(dh, one_minus(z)), dz = hlo::mul(dh, hlo::sub(h, n));
  Value dan = hlo::mul(dn, one_minus(hlo::mul(n, n)));
  Value dar = hlo::mul(hlo::mul(dan, hn), hlo::mul(r, one_minus(r)));
  Value daz = hlo::mul(dz, hlo::mul(z, one_minus(z)));
  Value gig = hlo::concatenate({dar, daz, dan}, 1), ghg = hlo::concatenate({dar, daz, hlo::mul(dan, r)}, 1);
  auto o = [&](Value v) { return hlo::convert(v, oe); };
  return {o(gig), o(ghg), o(hlo::mul(dh, z)), o(hlo::reduce(gig, {0}, hlo::ReduceKind::kSum)),
          o(hlo::reduce(ghg, {0}, hlo::ReduceKind::kSum))};
}

}  // namespace torch_tpu::lowering
