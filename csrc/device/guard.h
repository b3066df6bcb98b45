// Current-device bookkeeping shared by the device guard and the hooks.
#pragma once

#include <c10/core/Device.h>

namespace torch_tpu::device {

c10::DeviceIndex current_device();
// Also accepts the local rank in a job (own_index).
void set_current_device(c10::DeviceIndex index);
// The device a user-given index names. In a job each process owns one
// device, tpu:0, and a CUDA script names its GPU by the local rank
// (`torch.cuda.set_device(local_rank)`, `cuda:{local_rank}`): that index
// means tpu:0 here too, so the script runs with only "cuda" changed. Every
// other index is returned as is (and checked where it is used).
c10::DeviceIndex own_index(c10::DeviceIndex index);
// Number of tpu devices; starts the runtime on first call.
c10::DeviceIndex device_count();

}  // namespace torch_tpu::device
