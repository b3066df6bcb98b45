// Current-device bookkeeping shared by the device guard and the hooks.
#pragma once

#include <c10/core/Device.h>

namespace torch_tpu::device {

c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
// Number of tpu devices; starts the runtime on first call.
c10::DeviceIndex device_count();

}  // namespace torch_tpu::device
