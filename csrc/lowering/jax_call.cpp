#include "lowering/jax_call.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <set>
#include <unordered_map>

#include "hlo/embed.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {
namespace {

JaxLowerer& lowerer() {
  static auto* l = new JaxLowerer();
  return *l;
}

std::string short_name(const c10::FunctionSchema& s) { return s.name().substr(s.name().find("::") + 2); }

// Each embedding of one jax module gets its own prefix: two programs made
// from the same text (the same op on differently strided views) may meet
// in one fused module. Counting per text keeps the names, and so the
// persistent compile cache's keys, the same from one process to the next.
std::string prefix_for(const std::string& text) {
  static auto* seen = new std::unordered_map<size_t, int>();
  size_t h = std::hash<std::string>{}(text);
  int n = (*seen)[h]++;
  char buf[48];
  std::snprintf(buf, sizeof buf, "jx%016zx_%d_", h, n);
  return buf;
}

// The rule every jax_op shares: reads the input views, calls jax's
// function, returns its results (the meta kernel, jax.eval_shape, gave
// their types).
std::vector<Value> lower_jax_call(LowerCtx& ctx) {
  std::string name = short_name(ctx.schema());
  TORCH_CHECK(static_cast<bool>(lowerer()), "torch_tpu: jax_op ", name, " ran before torch_tpu.jax_op set up jax");
  std::vector<Value> ins = ctx.tensor_list("tensors");
  std::vector<hlo::TensorType> types;
  for (const auto& v : ins) {
    TORCH_CHECK(v.valid(), "torch_tpu: jax_op ", name, " got an undefined tensor");
    types.push_back(v.type());
  }
  std::string text = lowerer()(name, ctx.str_arg("spec"), types);
  std::vector<hlo::TensorType> outs;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    auto dt = ctx.out_dtype(i);
    auto sz = ctx.out_sizes(i);
    TORCH_CHECK(dt && sz, "torch_tpu: jax_op ", name, ": output ", i, " has no meta information");
    outs.push_back(hlo::TensorType{element_type(*dt), *sz});
  }
  return hlo::call_embedded(ctx.b(), hlo::embed_module(text, prefix_for(text)), "tpu_jax." + name, ins, outs);
}

}  // namespace

void set_jax_lowerer(JaxLowerer l) { lowerer() = std::move(l); }

void register_jax_op(const std::string& name) {
  static auto* mine = new std::set<std::string>();
  if (mine->count(name)) return;  // re-registered (a module imported twice): same rule
  TORCH_CHECK(find_rule(name) == nullptr, "torch_tpu.jax_op: '", name,
              "' is the name of a built-in op's lowering; choose another name");
  register_rule(name.c_str(), &lower_jax_call);
  mine->insert(name);
}

}  // namespace torch_tpu::lowering
