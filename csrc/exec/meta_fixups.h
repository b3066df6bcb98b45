// Where a meta kernel's output shapes, dtypes or strides differ from what
// PyTorch's CPU kernel returns, the engine follows CPU (the reference every
// result is checked against). One small table, applied right after the
// meta call.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <vector>

#include "lowering/context.h"

namespace torch_tpu::exec {

void fix_meta_returns(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                      std::vector<std::optional<lowering::OutputMeta>>& returns);

// The strides CPU gives new result `result` (of `sizes`) where no meta
// kernel says: channels-last convolution results. Empty: contiguous.
std::vector<int64_t> cpu_result_strides(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                        size_t result, const std::vector<int64_t>& sizes);

}  // namespace torch_tpu::exec
