// Checks on index values (and integer divisors) made on the device, used by
// every rule that indexes: the rule gets the indices it gathers or scatters
// with, and the program one more result, a flag saying whether any index
// was out of range (runtime/deferred_checks.h: read at the next
// synchronisation, or at the op in Debug Eager). Costs a compare and a
// reduction over the indices, no host round trip.
#pragma once

#include <string>

#include "lowering/context.h"

namespace torch_tpu::lowering {

// How an op treats negative indices: CPU counts them from the end for
// x[i], index_put, take, put and index_fill, and rejects them elsewhere.
enum class Negative { kWrap, kReject };

// `idx` (any integer type) as i64 indices into a dimension `dim` of `size`,
// negative ones counted from the end (so a rejected negative index still
// reads a valid element until the error surfaces), and a check recorded
// that every index lies in [-size, size) (kWrap) or [0, size) (kReject).
Value checked_index(LowerCtx& ctx, Value idx, int64_t dim, int64_t size, CheckKind kind, Negative neg);

// Records a check that no element of `bad` (i1, any shape) is set; `idx`
// (same shape, integer) gives the message its offending value.
void add_check(LowerCtx& ctx, Value bad, Value idx, CheckKind kind, int64_t dim, int64_t size, CheckError error);

// Records a check on an op's data that CPU makes on the host before it
// computes (multinomial's weights, bernoulli's p, max_unpool's indices):
// no element of `bad` (i1, any shape) may be set, else `message`, raised
// as `error` at the next synchronisation. A "{}" in `message` is replaced
// by the largest offending value of `idx` (same shape as `bad`, integer),
// when `idx` is given.
void check_data(LowerCtx& ctx, Value bad, std::string message, Value idx = Value(),
                CheckError error = CheckError::kRuntime);

// Records that the integer divisor `d` must have no zero element (CPU's
// "ZeroDivisionError"). No-op for floating and complex divisors.
void check_nonzero(LowerCtx& ctx, Value d);

// The error message for a failed check whose flag carried `value` (the
// offending index). `deferred`: it is raised after its op ran.
std::string check_message(const DeviceCheck& c, int64_t value, bool deferred);

}  // namespace torch_tpu::lowering
