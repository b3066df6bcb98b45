// Execution modes (docs/design.md, "Execution modes"): Strict Eager runs each
// op as soon as it is dispatched (asynchronously, on XLA's queue); Debug
// Eager also waits for its result; Fused Eager defers ops into a trace that
// runs as one compiled program when a value is needed.
//
// The modes live in a decorator over the Runtime interface (fusing_runtime.cpp):
// the op engine above it is the same in every mode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/donation.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

enum class EagerMode : int { kStrict = 0, kDebug = 1, kFused = 2 };

// The current mode. Until set_eager_mode is called it comes from the
// environment: TPU_LAUNCH_BLOCKING=1 -> debug, TPU_DEFER_AND_FUSE=1 -> fused.
EagerMode eager_mode();
// Leaving fused mode runs whatever is deferred first.
void set_eager_mode(EagerMode mode);
// Runs the deferred ops of every device (no-op outside fused mode).
void mark_step();

struct FusionStats {
  int64_t flushes = 0;         // traces run
  int64_t fused_ops = 0;       // ops that ran inside traces
  int64_t compiles = 0;        // fused programs compiled
  int64_t cache_hits = 0;      // traces that reused a compiled fused program
  int64_t skipped = 0;         // traces with no live result (nothing to run)
  int64_t pending_ops = 0;     // ops deferred now, all devices
  int64_t donated = 0;         // buffers written in place of their inputs: fused programs, replays (donation.h) and collectives (distributed/backend.cpp)
  int64_t donation_copies = 0; // buffers a replay copied because something else still held them
  int64_t chained_replays = 0; // replays appended to a pending trace instead of run (defer_replay)
  int64_t chain_cuts = 0;      // pending traces run before a replay that read too many of their bytes (XLA:CPU)
  int64_t split_traces = 0;    // recurring traces run split around their changed ops (fusing_runtime.cpp)
  int64_t window_programs = 0; // distinct fused programs run (compiled or found) since begin_program_window()
};
FusionStats fusion_stats();
// Starts counting the distinct fused programs that run from now on
// (FusionStats::window_programs). `compiles` alone undercounts what a piece
// of work needs when an earlier one in the process left identical programs
// in the cache (the zoo's causal LMs share tiny configs): the window counts
// a program found in the cache once, like one compiled.
void begin_program_window();
// Pauses (true) or resumes the cutting of recurring traces around their
// changed ops (split_if_unstable, fusing_runtime.cpp); returns the previous
// setting. Graphs run padded to buckets (torch_tpu/bounded_graph.py) pause
// it: their trace is the same on every call of a bucket, so cutting the
// first call of a new bucket around the ops whose sizes grew only compiles
// segment programs that the bucket never runs again.
bool set_split_paused(bool paused);
// Marks the device's pending trace (if any) to be compiled whole, never
// split. Fused Eager's bounded tensors (torch_tpu/bounded_tensor.py) mark
// the trace in which an op first runs at a new bucket: the steps of a
// bucket then share that program, while a split, its segments, would be
// compiled (and run) for that one step only.
void keep_trace_whole(int device);
// Counts donations of a replay (exec/graph_replay.cpp).
void note_donations(int64_t donated, int64_t copies);

// Whether the buffer's value has been computed (false while it is queued or
// deferred). Never waits.
bool buffer_ready(const BufferRef& buf);

// Tests only: frees the device memory behind `buf` (running it first if it
// is deferred), as a failed device would; programs reading it then fail.
void invalidate_buffer_for_test(const BufferRef& buf);

// ---- capture (exec/graph_replay.*) -------------------------------------------
// A capture watches one compiled graph call run in Fused Eager. If all of
// its ops became exactly one trace, capture_end() hands back what a replay
// needs to run that trace again without dispatching its ops.
// A captured trace's ops and wiring (fusing_runtime.cpp): what a chained
// replay appends to the pending trace (defer_replay).
struct CapturedOps;

struct CapturedTrace {
  std::string refused;              // why it cannot be replayed; empty when it can
  ExecutableRef exe;                // null: nothing ran (no ops, or no live result)
  std::vector<BufferRef> params;    // the trace's parameters (real buffers), in order
  std::vector<int> exe_args;        // the executable's arguments as indices into params
  std::vector<BufferRef> results;   // the trace's live lazy buffers, in result order
  std::vector<int> exe_outputs;     // the executable's output index of each result
  Aliases aliases;                  // (exe argument, exe output) pairs the exe donates (donation.h)
  std::vector<int> donors;          // params that are recycled buffers given only to hold a result
  std::string text;                 // the program without aliases, when it has some or keep_text was asked
  std::shared_ptr<const CapturedOps> ops;  // the trace's ops, for chained replays
};
// Runs every pending trace (outer eager work must not join the graph), then
// watches `device` from this thread. Lock held by the callers (GIL).
// `keep_text`: CapturedTrace::text is always filled (torch_tpu.export).
void capture_begin(int device, bool keep_text = false);
// Flushes and stops watching.
CapturedTrace capture_end();
// Stops watching (the graph raised).
void capture_abort();
bool capture_active();
// The real buffer behind `buf` (runs its trace if it is deferred).
BufferRef resolve_buffer(const BufferRef& buf);
// Runs an executable returned by capture_end now, in any mode, and tracks
// its outputs for synchronize.
std::vector<BufferRef> execute_now(const Executable& exe, const std::vector<BufferRef>& args);

// Chained replays (docs/design.md, "One program per training step"): instead
// of running its executable, a replay appends its captured ops to `device`'s
// pending trace, `params` standing for the trace's parameters (the buffers,
// lazy ones included, in CapturedTrace::params order; null for those no op
// reads), and returns its results as lazy buffers in CapturedTrace::results
// order. The pending trace runs when a value is needed, at synchronize or
// mark_step, and before the same replay is appended to it a second time (the
// next training step's forward): so a step whose forward, backward and
// optimizer graphs are all replays runs as one program. Lock held by callers.
std::vector<BufferRef> defer_replay(const std::shared_ptr<const CapturedOps>& ops,
                                    const std::vector<BufferRef>& params, int device);
// Whether replays are chained (TORCH_TPU_REPLAY_CHAIN, default on; never in
// Debug Eager or while a capture runs: GraphReplay::run decides).
bool replay_chaining();
void set_replay_chaining(bool on);
// A replay that reads at least this many bytes of the pending trace's
// results runs that trace first instead of joining it (0: no bound;
// default 32 MiB on XLA:CPU unless malloc keeps freed memory, else 0;
// TPU_REPLAY_CHAIN_MAX_LINK_BYTES). Returns the previous bound.
int64_t set_replay_chain_max_link_bytes(int64_t bytes);

// The captured program `text` donating only `aliases` (compiled once per set).
ExecutableRef compile_with_aliases(const std::string& text, const Aliases& aliases, int device);
// A new device buffer with the same contents (for a donation whose buffer
// turns out to be shared).
BufferRef copy_buffer(const BufferRef& buf);

// Freed buffers kept for reuse (xla_runtime.cpp, Recycler): one of exactly
// `type`, or null; whether a buffer of `type` is worth keeping; dropping
// them all (torch.tpu.empty_cache); the bytes kept for `device`.
BufferRef take_recycled(const hlo::TensorType& type, int device);
bool recycles(const hlo::TensorType& type);
void release_recycled();
// A recycled buffer of `type`, else a new one; its contents are not to be read.
BufferRef recycled_or_new(const hlo::TensorType& type, int device);
int64_t recycled_bytes(int device);

// Wraps the XLA runtime in the mode decorator; get() returns the result.
std::unique_ptr<Runtime> make_mode_runtime(Runtime& inner);

// Implemented by the XLA runtime for real (non-deferred) buffers.
bool xla_buffer_ready(const DeviceBuffer& buf);
// Blocks until the buffer is computed; raises c10::Error naming `what` if
// the computation failed.
void xla_buffer_wait(const DeviceBuffer& buf, const char* what);
// The same for several buffers, in one call when none has failed or been
// deleted (the common case); otherwise one by one, naming the failure.
void xla_buffers_wait(const std::vector<BufferRef>& bufs, const char* what);
void xla_buffer_delete(const DeviceBuffer& buf);

}  // namespace torch_tpu::runtime
