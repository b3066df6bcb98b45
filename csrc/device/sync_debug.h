// torch.tpu.set_sync_debug_mode, as torch.cuda's: warn or raise when an op
// makes the host wait for the device (a copy to the host, item(), an op
// whose result's shape depends on the data). Such waits stall the queue of
// programs a TPU runs ahead on, so finding them is how a training loop
// gets fast; the mode is global to the process, as CUDA's.
#pragma once

namespace torch_tpu::device {

// 0: nothing (the default), 1: warn, 2: raise.
void set_sync_debug_mode(int mode);
int sync_debug_mode();
// Called where the host waits for a tpu result: `what` names the wait.
void on_host_wait(const char* what);

}  // namespace torch_tpu::device
