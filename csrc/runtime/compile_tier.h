// Quick first compiles. A compiled graph's first call builds fused
// programs that, with replays chained into one program per step, run only
// on that call and the capture after it (docs/design.md, "First-call
// compile time"). While quick compiles are on (graph_replay.py turns them
// on around a graph's first call) the runtime compiles with
// quick_compile_options() instead of XLA's defaults (a quarter to a third
// of the compile's CPU time; the program runs 1.0-1.5x slower and its
// results differ from the optimised build's by float rounding only) and
// rebuilds a program with the defaults when it runs a third time (a graph
// that keeps running it: replays not chained, or refused).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::runtime {

// Whether programs compiled on this thread now are quick ones (XLA:CPU
// only; no effect on other platforms, or with
// TORCH_TPU_QUICK_FIRST_COMPILE=0).
bool quick_compile_active();
// Sets this thread's state, returns the previous one (Python's scope
// restores it: _C._set_quick_compile).
bool set_quick_compile(bool on);

// XLA:CPU debug options of a quick compile (CompileOptions'
// env_option_overrides). By default, measured alone on the GPT-2-shaped
// training step's forward and backward programs (docs/design.md,
// "First-call compile time"): LLVM -O0 halves the compile
// (xla_backend_optimization_level=0); the older elemental IR emitters
// instead of the MLIR fusion emitters, each fusion of which builds its own
// MLIR context and pass pipeline, halve it again with bit-identical results
// at -O0 (xla_cpu_use_fusion_emitters=false); one LLVM module instead of
// parallel codegen splits saves the splitting's overhead, on 2 cores more
// than the parallelism gains (xla_cpu_parallel_codegen_split_count=1).
// Optimised builds keep XLA's defaults: there the fusion emitters compile
// and run faster. A quick compile XLA refuses is compiled with the
// defaults instead (not counted as quick).
struct QuickCompileOption {
  std::string name;
  int64_t value;
  bool boolean;  // XLA takes a boolean option only as a Python bool
};
std::vector<QuickCompileOption> quick_compile_options();
// The options as "name=value;..." (booleans as true/false), also part of a
// quick build's persistent-cache key.
std::string quick_compile_options_text();
// Replaces the options (same format; "" for none), for measuring other
// sets in one process (_C._set_quick_compile_options). Returns the
// previous text. A malformed text raises and changes nothing.
std::string set_quick_compile_options(const std::string& text);

// A quick program is rebuilt at its this-many-th run.
constexpr int kQuickRunsBeforeRebuild = 3;
// Smaller StableHLO texts are always compiled optimised.
constexpr size_t kQuickMinTextBytes = 8192;

struct QuickCompileStats {
  int64_t quick_compiles = 0;   // programs compiled quick
  int64_t rebuilds = 0;         // of which rebuilt at the normal level
  double rebuild_seconds = 0;   // time those rebuilds took
};
QuickCompileStats quick_compile_stats();
void note_quick_compile();
void note_rebuild(double seconds);

}  // namespace torch_tpu::runtime
