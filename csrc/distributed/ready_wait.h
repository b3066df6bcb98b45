// Waiting for a collective's result within the group's timeout
// (docs/design.md, "Work, timeouts, dead peers").
//
// XLA has no wait with a deadline, and jax's Python API no ready callback:
// `block_until_ready` blocks (the GIL released) until the buffer is
// computed or its program failed, which for a collective whose peer never
// comes is XLA's own collective timeout, possibly longer than the group's.
// Polling `is_ready` instead cost CPU the peer rank needs on a shared
// machine (each poll takes the GIL) and its naps overslept short
// collectives. So a helper thread blocks in XLA for the caller, which
// sleeps on a condition variable until the helper signals or the deadline
// passes. A helper left blocked by a timed-out wait stays so until XLA
// gives up; later waits get another helper.
#pragma once

#include <chrono>

#include "runtime/runtime.h"

namespace torch_tpu::distributed {

// Waits until `b` (a device buffer, not a lazy one) is computed: true, or
// false once `deadline` passed first. Raises c10::Error naming `what` if
// its program failed. Takes the GIL or not; releases it while it sleeps.
bool wait_ready_until(const runtime::BufferRef& b, std::chrono::steady_clock::time_point deadline,
                      const std::string& what);

}  // namespace torch_tpu::distributed
