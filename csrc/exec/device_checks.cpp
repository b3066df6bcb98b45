#include "exec/device_checks.h"

#include <c10/util/Exception.h>

#include "lowering/index_check.h"

namespace torch_tpu::exec {

namespace {

class OpCheck final : public runtime::DeferredCheck {
 public:
  explicit OpCheck(const lowering::DeviceCheck& c) : c_(c) { c_.flag = lowering::Value(); }
  [[noreturn]] void raise(int64_t value, bool deferred) const override {
    std::string msg = lowering::check_message(c_, value, deferred);
    switch (c_.error) {
      case lowering::CheckError::kLinAlg: TORCH_CHECK_LINALG(false, msg);
      case lowering::CheckError::kIndex: TORCH_CHECK_INDEX(false, msg);
      case lowering::CheckError::kRuntime: break;
    }
    TORCH_CHECK(false, msg);
  }

 private:
  lowering::DeviceCheck c_;  // without its flag value (the builder is gone)
};

}  // namespace

runtime::CheckRef make_check(const lowering::DeviceCheck& c) { return std::make_shared<OpCheck>(c); }

}  // namespace torch_tpu::exec
