// The execution layer's side of the device-side checks: a rule's
// lowering::DeviceCheck becomes a runtime::DeferredCheck whose error names
// the op with CPU's exception type and wording (lowering/index_check.h,
// runtime/deferred_checks.h).
#pragma once

#include "lowering/context.h"
#include "runtime/deferred_checks.h"

namespace torch_tpu::exec {

runtime::CheckRef make_check(const lowering::DeviceCheck& c);

}  // namespace torch_tpu::exec
