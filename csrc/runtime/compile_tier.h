// Quick first compiles. A compiled graph's first call builds fused
// programs that, with replays chained into one program per step, run only
// on that call and the capture after it (docs/design.md, "First-call
// compile time"). XLA:CPU spends about half of such a compile in LLVM's
// optimiser; while quick compiles are on (graph_replay.py turns them on
// around a graph's first call) the runtime compiles at LLVM -O0
// instead (about half the compile time, the program runs 1.3-1.8x slower)
// and rebuilds a program at the normal level when it runs a third time
// (a graph that keeps running it: replays not chained, or refused).
#pragma once

#include <cstddef>
#include <cstdint>

namespace torch_tpu::runtime {

// Whether programs compiled on this thread now are quick ones (XLA:CPU
// only; no effect on other platforms, or with
// TORCH_TPU_QUICK_FIRST_COMPILE=0).
bool quick_compile_active();
// Sets this thread's state, returns the previous one (Python's scope
// restores it: _C._set_quick_compile).
bool set_quick_compile(bool on);

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
