// Where a meta kernel's output shapes differ from what PyTorch's CPU kernel
// returns, the engine follows CPU (the reference every result is checked
// against). One small table, applied right after the meta call.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <vector>

#include "lowering/context.h"

namespace torch_tpu::exec {

void fix_meta_returns(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                      std::vector<std::optional<lowering::OutputMeta>>& returns);

}  // namespace torch_tpu::exec
