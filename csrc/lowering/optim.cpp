// Fused optimizer steps: _fused_adam_, _fused_adamw_, _fused_sgd_,
// _fused_adagrad_ (what torch.optim calls with fused=True). One program
// updates every tensor of the lists, following PyTorch's CPU kernels
// (aten/src/ATen/native/cpu/Fused*Kernel.cpp) element by element: math in
// f32 (f64 for double parameters), grads unscaled by `grad_scale` and written
// back, and nothing changed when `found_inf` is 1.
//
// The ops return nothing: the engine writes one value per item of every
// mutable list argument, in argument order, so each rule returns the new
// contents of self, grads, and the state lists (steps unchanged).
// Their `float` arguments (lr, betas, ...) are runtime operands: the engine
// keeps them out of the program key for `_fused_*` ops, so a scheduler
// changing the learning rate never recompiles.
#include <limits>

#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

struct Fused {
  LowerCtx& ctx;
  at::ScalarType opmath;
  ElementType e;

  explicit Fused(LowerCtx& c) : ctx(c) {
    const auto& list = c.arg("self").toListRef();
    opmath = !list.empty() && list[0].toTensor().scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    e = element_type(opmath);
  }
  // A float / Tensor argument as a rank-0 opmath value.
  Value scalar(const char* name) {
    Value v = ctx.operand(name, opmath);
    if (v.rank() != 0) v = hlo::reshape(v, {});
    return v;
  }
  Value c(double v) { return hlo::constant(ctx.b(), e, v); }
  static Value bc(Value s, const Dims& dims) { return hlo::broadcast_in_dim(s, dims, {}); }
  // found_inf == 1 as a rank-0 predicate, or invalid when absent.
  Value skip() {
    if (ctx.is_none("found_inf")) return Value();
    Value f = hlo::convert(ctx.tensor("found_inf"), ElementType::kF32);
    if (f.rank() != 0) f = hlo::reshape(f, {});
    return hlo::compare(f, hlo::constant(ctx.b(), ElementType::kF32, 1.0), "EQ");
  }
  Value inv_scale() {
    if (ctx.is_none("grad_scale")) return Value();
    Value s = hlo::convert(ctx.tensor("grad_scale"), e);
    if (s.rank() != 0) s = hlo::reshape(s, {});
    return s;
  }
  // Keeps `old` where found_inf says so; converts back to `like`'s type.
  static Value keep(Value skip, Value updated, Value old) {
    updated = hlo::convert(updated, old.element());
    if (!skip.valid()) return updated;
    return hlo::select(bc(skip, old.dims()), old, updated);
  }
  Value step_of(Value step) {
    step = hlo::convert(step, e);
    if (step.rank() != 0) step = hlo::reshape(step, {});
    return step;
  }
  void check_lists(std::initializer_list<const char*> names) {
    size_t n = ctx.arg("self").toListRef().size();
    for (auto name : names) {
      size_t m = ctx.arg(name).toListRef().size();
      TORCH_CHECK(m == n || m == 0, ctx.op_name(), ": expected ", n, " tensors in '", name, "', got ", m);
    }
  }
};

std::vector<Value> adam(LowerCtx& ctx, bool adamw) {
  Fused f(ctx);
  f.check_lists({"grads", "exp_avgs", "exp_avg_sqs", "state_steps"});
  auto params = ctx.tensor_list("self");
  auto grads = ctx.tensor_list("grads");
  auto avgs = ctx.tensor_list("exp_avgs");
  auto sqs = ctx.tensor_list("exp_avg_sqs");
  auto maxs = ctx.tensor_list("max_exp_avg_sqs");
  auto steps = ctx.tensor_list("state_steps");
  bool amsgrad = ctx.bool_arg("amsgrad"), maximize = ctx.bool_arg("maximize");
  TORCH_CHECK(!amsgrad || maxs.size() == params.size(), ctx.op_name(), ": amsgrad needs one max_exp_avg_sq per parameter");
  Value lr = f.scalar("lr"), beta1 = f.scalar("beta1"), beta2 = f.scalar("beta2");
  Value wd = f.scalar("weight_decay"), eps = f.scalar("eps");
  Value skip = f.skip(), scale = f.inv_scale();
  Value one = f.c(1.0);
  Value c1 = hlo::sub(one, beta1), c2 = hlo::sub(one, beta2);
  Value small = hlo::compare(hlo::unary("abs", c1), f.c(0.5), "LT");
  std::vector<Value> new_p, new_g, new_m, new_v, new_max;
  for (size_t i = 0; i < params.size(); ++i) {
    const Dims dims = params[i].dims();
    auto B = [&](Value s) { return Fused::bc(s, dims); };
    Value step = f.step_of(steps[i]);
    Value bias1 = hlo::sub(one, hlo::binary("power", beta1, step));
    Value bias2 = hlo::sub(one, hlo::binary("power", beta2, step));
    Value step_size = hlo::div(lr, bias1);
    Value bias2_sqrt = hlo::unary("sqrt", bias2);
    Value p = hlo::convert(params[i], f.e), g = hlo::convert(grads[i], f.e);
    if (scale.valid()) g = hlo::div(g, B(scale));
    Value g_out = g;
    if (maximize) g = hlo::neg(g);
    if (adamw) {
      p = hlo::mul(p, B(hlo::sub(one, hlo::mul(lr, wd))));
    } else {
      g = hlo::add(g, hlo::mul(p, B(wd)));
    }
    Value m = hlo::convert(avgs[i], f.e);
    Value diff = hlo::sub(g, m);
    Value m_small = hlo::add(m, hlo::mul(B(c1), diff));
    Value m_big = hlo::sub(g, hlo::mul(diff, B(hlo::sub(one, c1))));
    Value m_new = hlo::select(B(small), m_small, m_big);
    // Rounded to the state's dtype before it is used, as on CPU.
    m_new = hlo::convert(hlo::convert(m_new, avgs[i].element()), f.e);
    Value v = hlo::convert(sqs[i], f.e);
    Value v_new = hlo::add(hlo::mul(v, B(beta2)), hlo::mul(hlo::mul(B(c2), g), g));
    v_new = hlo::convert(hlo::convert(v_new, sqs[i].element()), f.e);
    Value denom_src = v_new;
    if (amsgrad) {
      Value mx = hlo::max(hlo::convert(maxs[i], f.e), v_new);
      mx = hlo::convert(hlo::convert(mx, maxs[i].element()), f.e);
      new_max.push_back(Fused::keep(skip, mx, maxs[i]));
      denom_src = mx;
    }
    Value denom = hlo::add(hlo::div(hlo::unary("sqrt", denom_src), B(bias2_sqrt)), B(eps));
    Value p_new = hlo::sub(p, hlo::div(hlo::mul(B(step_size), m_new), denom));
    new_p.push_back(Fused::keep(skip, p_new, params[i]));
    new_g.push_back(Fused::keep(skip, g_out, grads[i]));
    new_m.push_back(Fused::keep(skip, m_new, avgs[i]));
    new_v.push_back(Fused::keep(skip, v_new, sqs[i]));
  }
  if (!amsgrad) new_max = maxs;  // written back unchanged
  std::vector<Value> out;
  for (auto* l : {&new_p, &new_g, &new_m, &new_v, &new_max}) out.insert(out.end(), l->begin(), l->end());
  return out;
}

}  // namespace

TPU_LOWERING(_fused_adam_) { return adam(ctx, false); }
TPU_LOWERING(_fused_adamw_) { return adam(ctx, true); }

TPU_LOWERING(_fused_sgd_) {
  Fused f(ctx);
  f.check_lists({"grads", "momentum_buffer_list"});
  auto params = ctx.tensor_list("self");
  auto grads = ctx.tensor_list("grads");
  auto bufs = ctx.tensor_list("momentum_buffer_list");
  bool nesterov = ctx.bool_arg("nesterov"), maximize = ctx.bool_arg("maximize");
  bool first = ctx.bool_arg("is_first_step");
  Value lr = f.scalar("lr"), wd = f.scalar("weight_decay"), mom = f.scalar("momentum");
  Value damp = f.scalar("dampening");
  Value one = f.c(1.0);
  Value skip = f.skip(), scale = f.inv_scale();
  bool has_momentum = !bufs.empty();
  std::vector<Value> new_p, new_g, new_b;
  for (size_t i = 0; i < params.size(); ++i) {
    const Dims dims = params[i].dims();
    auto B = [&](Value s) { return Fused::bc(s, dims); };
    Value p = hlo::convert(params[i], f.e), g = hlo::convert(grads[i], f.e);
    if (scale.valid()) g = hlo::div(g, B(scale));
    Value g_out = g;
    if (maximize) g = hlo::neg(g);
    g = hlo::add(g, hlo::mul(p, B(wd)));  // weight_decay 0 adds 0
    if (has_momentum) {
      Value buf = first ? g
                        : hlo::add(hlo::mul(hlo::convert(bufs[i], f.e), B(mom)), hlo::mul(B(hlo::sub(one, damp)), g));
      buf = hlo::convert(hlo::convert(buf, bufs[i].element()), f.e);
      new_b.push_back(Fused::keep(skip, buf, bufs[i]));
      g = nesterov ? hlo::add(g, hlo::mul(buf, B(mom))) : buf;
    }
    new_p.push_back(Fused::keep(skip, hlo::sub(p, hlo::mul(B(lr), g)), params[i]));
    new_g.push_back(Fused::keep(skip, g_out, grads[i]));
  }
  std::vector<Value> out;
  for (auto* l : {&new_p, &new_g, &new_b}) out.insert(out.end(), l->begin(), l->end());
  return out;
}

TPU_LOWERING(_fused_adagrad_) {
  Fused f(ctx);
  f.check_lists({"grads", "state_sums", "state_steps"});
  auto params = ctx.tensor_list("self");
  auto grads = ctx.tensor_list("grads");
  auto sums = ctx.tensor_list("state_sums");
  auto steps = ctx.tensor_list("state_steps");
  bool maximize = ctx.bool_arg("maximize");
  Value lr = f.scalar("lr"), decay = f.scalar("lr_decay"), wd = f.scalar("weight_decay"), eps = f.scalar("eps");
  Value one = f.c(1.0);
  Value skip = f.skip(), scale = f.inv_scale();
  std::vector<Value> new_p, new_g, new_s;
  for (size_t i = 0; i < params.size(); ++i) {
    const Dims dims = params[i].dims();
    auto B = [&](Value s) { return Fused::bc(s, dims); };
    Value step = f.step_of(steps[i]);
    Value clr = hlo::div(lr, hlo::add(one, hlo::mul(hlo::sub(step, one), decay)));
    Value p = hlo::convert(params[i], f.e), g = hlo::convert(grads[i], f.e);
    if (scale.valid()) g = hlo::div(g, B(scale));
    Value g_out = g;
    if (maximize) g = hlo::neg(g);
    g = hlo::add(g, hlo::mul(p, B(wd)));
    Value s = hlo::add(hlo::convert(sums[i], f.e), hlo::mul(g, g));
    s = hlo::convert(hlo::convert(s, sums[i].element()), f.e);
    Value std_ = hlo::add(hlo::unary("sqrt", s), B(eps));
    new_p.push_back(Fused::keep(skip, hlo::sub(p, hlo::div(hlo::mul(B(clr), g), std_)), params[i]));
    new_g.push_back(Fused::keep(skip, g_out, grads[i]));
    new_s.push_back(Fused::keep(skip, s, sums[i]));
  }
  std::vector<Value> out;
  for (auto* l : {&new_p, &new_g, &new_s}) out.insert(out.end(), l->begin(), l->end());
  out.insert(out.end(), steps.begin(), steps.end());  // state_steps: written back unchanged
  return out;
}

// ---- GradScaler (torch.amp.GradScaler("tpu")) ----------------------------

// grads *= inv_scale; found_inf = 1 if any grad has an inf or NaN (it is
// never reset here: GradScaler zeroes it).
TPU_LOWERING(_amp_foreach_non_finite_check_and_unscale_) {
  auto grads = ctx.tensor_list("self");
  Value found = ctx.tensor("found_inf");
  TORCH_CHECK(ctx.tensor_arg("found_inf").numel() == 1, ctx.op_name(), ": found_inf must be a 1-element tensor");
  TORCH_CHECK(ctx.tensor_arg("inv_scale").numel() == 1, ctx.op_name(), ": inv_scale must be a 1-element tensor");
  TORCH_CHECK(ctx.tensor_arg("found_inf").scalar_type() == at::kFloat, ctx.op_name(), ": found_inf must be a float tensor");
  TORCH_CHECK(ctx.tensor_arg("inv_scale").scalar_type() == at::kFloat, ctx.op_name(), ": inv_scale must be a float tensor");
  Value inv = hlo::reshape(ctx.tensor("inv_scale"), {});
  Builder& b = ctx.b();
  Value any_bad = hlo::constant(b, ElementType::kPred, 0);
  std::vector<Value> out;
  for (const auto& g : grads) {
    Value x = hlo::convert(g, ElementType::kF32);
    if (g.element() == ElementType::kF64) x = g;
    Value inf = hlo::full(b, x.element(), x.dims(), std::numeric_limits<double>::infinity());
    Value finite = hlo::compare(hlo::unary("abs", x), inf, "LT");
    Dims all;
    for (int64_t d = 0; d < x.rank(); ++d) all.push_back(d);
    Value ok = hlo::reduce(finite, all, hlo::ReduceKind::kAnd);
    any_bad = hlo::binary("or", any_bad, hlo::unary("not", ok));
    Value scaled = hlo::mul(x, hlo::broadcast_in_dim(hlo::convert(inv, x.element()), x.dims(), {}));
    out.push_back(hlo::convert(scaled, g.element()));
  }
  Value f = hlo::reshape(found, {});
  f = hlo::select(any_bad, hlo::constant(b, ElementType::kF32, 1.0), f);
  out.push_back(hlo::reshape(f, found.dims()));
  return out;
}

// The scale update GradScaler.update() makes, without a sync.
TPU_LOWERING(_amp_update_scale_) {
  Builder& b = ctx.b();
  TORCH_CHECK(ctx.tensor_arg("self").numel() == 1, ctx.op_name(), ": current_scale must be a 1-element tensor");
  TORCH_CHECK(ctx.tensor_arg("growth_tracker").numel() == 1, ctx.op_name(), ": growth_tracker must be a 1-element tensor");
  TORCH_CHECK(ctx.tensor_arg("found_inf").numel() == 1, ctx.op_name(), ": found_inf must be a 1-element tensor");
  TORCH_CHECK(ctx.tensor_arg("self").scalar_type() == at::kFloat, ctx.op_name(), ": current_scale must be a float tensor");
  TORCH_CHECK(ctx.tensor_arg("growth_tracker").scalar_type() == at::kInt, ctx.op_name(),
              ": growth_tracker must be an int tensor");
  Value scale = hlo::reshape(ctx.tensor("self"), {});
  Value tracker = hlo::reshape(ctx.tensor("growth_tracker"), {});
  Value found = hlo::reshape(hlo::convert(ctx.tensor("found_inf"), ElementType::kF32), {});
  Value growth = hlo::constant(b, ElementType::kF32, ctx.float_arg("scale_growth_factor"));
  Value backoff = hlo::constant(b, ElementType::kF32, ctx.float_arg("scale_backoff_factor"));
  Value interval = hlo::constant_int(b, ElementType::kI32, ctx.int_arg("growth_interval"));
  Value zero_i = hlo::constant_int(b, ElementType::kI32, 0);
  Value bad = hlo::compare(found, hlo::constant(b, ElementType::kF32, 0.0), "NE");
  Value successful = hlo::add(tracker, hlo::constant_int(b, ElementType::kI32, 1));
  Value grow = hlo::compare(successful, interval, "EQ");
  Value grown = hlo::mul(scale, growth);
  Value grown_ok = hlo::compare(hlo::unary("abs", grown), hlo::constant(b, ElementType::kF32,
                                std::numeric_limits<double>::infinity()), "LT");
  Value good_scale = hlo::select(grow, hlo::select(grown_ok, grown, scale), scale);
  Value good_tracker = hlo::select(grow, zero_i, successful);
  Value new_scale = hlo::select(bad, hlo::mul(scale, backoff), good_scale);
  Value new_tracker = hlo::select(bad, zero_i, good_tracker);
  return {new_scale, new_tracker};
}

}  // namespace torch_tpu::lowering
