// What the op engine tells a graph capture (graph_replay.h) about the
// buffers it uploads while the capture runs: a fused program's parameter is
// either an input storage's buffer or one of these, and a replay must know
// which to pass it again (a constant), to draw anew (a random key) or that it
// cannot reproduce it (a value taken from the host).
#pragma once

#include <ATen/core/Generator.h>

#include <atomic>

#include "runtime/deferred_checks.h"
#include "runtime/runtime.h"

namespace torch_tpu::exec::capture {

extern std::atomic<bool> g_active;
// Cheap enough for every upload.
inline bool active() { return g_active.load(std::memory_order_relaxed); }

// A Scalar argument: a constant of the graph.
void note_constant(const runtime::BufferRef& buf);
// A value read from host memory (a CPU tensor argument): it may change
// between calls, so the graph is not replayable with this buffer. Wins over
// note_constant (the scalar upload cache may hand both the same buffer).
void note_host_value(const runtime::BufferRef& buf);
// A random key drawn from `gen`: a replay draws a fresh one.
void note_rng_key(const runtime::BufferRef& buf, const at::Generator& gen);
// The flag of a device-side check (deferred_checks.h): a result of the
// graph that a replay hands to the checks again.
void note_check(const runtime::BufferRef& flag, const runtime::CheckRef& check);

}  // namespace torch_tpu::exec::capture
