// The table of lowering rules: ATen op name (without namespace and
// overload) -> rule. One rule serves every overload of an op, its in-place
// form (`add_`) and its out= form (`add.out`); it inspects its arguments by
// name to tell overloads apart.
#pragma once

#include <string>
#include <vector>

#include "lowering/context.h"

namespace torch_tpu::lowering {

using Rule = std::vector<Value> (*)(LowerCtx& ctx);

void register_rule(const char* name, Rule rule);
// Rule for an operator name such as "add" or "add_" (the trailing
// underscore of in-place ops is tried off too); nullptr if none.
Rule find_rule(const std::string& name);
std::vector<std::string> rule_names();

struct RuleRegistrar {
  RuleRegistrar(const char* name, Rule rule) { register_rule(name, rule); }
};

}  // namespace torch_tpu::lowering

// Defines the rule for ATen op `name`:
//   TPU_LOWERING(abs) { return {hlo::unary("abs", ctx.tensor("self"))}; }
#define TPU_LOWERING(name)                                                                 \
  static std::vector<::torch_tpu::hlo::Value> tpu_lower_##name(::torch_tpu::lowering::LowerCtx&); \
  static ::torch_tpu::lowering::RuleRegistrar tpu_registrar_##name(#name, &tpu_lower_##name);     \
  static std::vector<::torch_tpu::hlo::Value> tpu_lower_##name(::torch_tpu::lowering::LowerCtx& ctx)

// Registers an existing rule under another op name (aliases such as
// `absolute` -> `abs`, or forward/backward pairs sharing code).
#define TPU_LOWERING_ALIAS(alias, name) \
  static ::torch_tpu::lowering::RuleRegistrar tpu_registrar_alias_##alias(#alias, &tpu_lower_##name)
