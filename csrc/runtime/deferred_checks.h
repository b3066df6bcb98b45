// Checks whose outcome the device computes (docs/design.md, "Deferred
// checks"): an op whose arguments can only be validated by looking at data
// (an index out of range, an integer division by zero) returns one more
// small result, a flag, instead of making the host wait for it. The flags
// stay pending per device and are read when the host waits anyway (to_host:
// .item(), .cpu(), printing; synchronize), as CUDA's device-side asserts
// surface at the next synchronisation; Debug Eager reads each at its op.
//
// A flag is a tensor<2xi64>: [failed (0 or 1), a value for the message
// (the offending index)]. Touched with the runtime lock (GIL) held.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::runtime {

// What a failed flag means: raise() throws the op's error.
class DeferredCheck {
 public:
  virtual ~DeferredCheck() = default;
  // `value`: the flag's second element; `deferred`: the error surfaces
  // after its op (the message says so). Always throws.
  [[noreturn]] virtual void raise(int64_t value, bool deferred) const = 0;
};
using CheckRef = std::shared_ptr<const DeferredCheck>;

// Keeps `flag` (an output of a program run on `device`) until the next
// synchronisation of that device; in Debug Eager reads it now and raises.
void defer_check(int device, BufferRef flag, CheckRef check);

// Whether any flag is pending anywhere: one relaxed load, the whole cost of
// the checks for a program that ran no checking op.
extern std::atomic<int64_t> g_pending_checks;
inline bool checks_pending() { return g_pending_checks.load(std::memory_order_relaxed) != 0; }

// Reads the computed flags pending on `device` and raises the first failed
// one's error (the others are dropped with it, as after a CUDA assert).
// A flag still deferred in a Fused Eager trace is left for a later sync:
// reading it would run the trace early. Implemented by the mode runtime
// (fusing_runtime.cpp), which calls it from to_host and synchronize.
void run_checks(int device);

// Flags pending on `device` (tests).
int64_t pending_check_count(int device);

// ---- the mode runtime's side ------------------------------------------------
struct PendingCheck {
  BufferRef flag;
  CheckRef check;
};
// Takes the pending flags of `device` out of the list (put back the ones
// not read with restore_checks, in order, before any new one).
std::vector<PendingCheck> take_checks(int device);
void restore_checks(int device, std::vector<PendingCheck> checks);

}  // namespace torch_tpu::runtime
