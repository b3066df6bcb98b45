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

// The options a program is compiled with. Decided once, by the caller of
// the compile (XlaRuntime::compile), from the text alone.
enum class CompileTier {
  kOptimised,  // XLA's defaults
  kQuick,      // quick_compile_options(); rebuilt optimised at its kQuickRunsBeforeRebuild-th run
  kSmall,      // the small-program options below; never rebuilt
  kTiny,       // kSmall's at LLVM -O0; never rebuilt
};
// A single-device program's tier: quick while quick compiles are active
// and the text has at least kQuickMinTextBytes, tiny or small for a tiny or
// small program, else optimised. Both shortcuts exist on XLA:CPU only (`cpu`).
CompileTier compile_tier(const std::string& text, bool cpu);

// A quick program is rebuilt at its this-many-th run.
constexpr int kQuickRunsBeforeRebuild = 3;
// Smaller StableHLO texts are never compiled quick (they may be small
// programs, below).
constexpr size_t kQuickMinTextBytes = 8192;

// Small programs: on XLA:CPU a program whose text is under
// kQuickMinTextBytes and whose every tensor has at most
// kSmallProgramMaxElements elements (a Strict Eager op on small tensors, a
// growing generate's cat, a conv weight's init) is always compiled with
// XLA:CPU's elemental IR emitters and one LLVM module
// (tier_options(kSmall)), at the normal LLVM level. Measured on the 2,266 programs of
// tests/test_opinfo_slice.py, one XLA compile each: 150 s -> 73 s of
// compile (median program 23 -> 16 ms; rng_bit_generator programs of
// conv-weight shapes 1.1-1.4 s -> 50 ms), runtimes within noise up to
// 16,384 elements. Never rebuilt: the build is the program's only one, so
// its results do not change between runs (they can differ from the fusion
// emitters' in a reduction's last bit). Larger programs keep XLA's
// defaults, where the fusion emitters compile faster (a 200-op fused
// decode step: 0.49 -> 0.76 s with these options).
// TORCH_TPU_SMALL_PROGRAM_OPTIONS=0 turns it off.
constexpr int64_t kSmallProgramMaxElements = 16384;
bool is_small_program(const std::string& text);
bool small_program_options_enabled();

// Tiny programs: small programs whose every tensor has at most
// kTinyProgramMaxElements elements (an op on a few hundred values: a
// generate step's attention row, a token id's comparisons, most test
// inputs) are also built at LLVM -O0 (xla_backend_optimization_level=0),
// which compiles them in about half the time: a small Llama's 64-token
// Strict Eager generate compiles 801 small programs, 15.6 s at the small
// options; the 385 of them with at most 256 elements take 7.7 s of that,
// 4.2 s at -O0 (a softmax row 43 -> 17 ms). Unvectorised code costs a
// little at run time, growing with the size: exp, log or tanh of 256
// floats 1-2 us more a call, of 1,024 floats 3-5 us (eager_overhead.py's
// chain of ten ops on 1,000 floats: 148 -> 176-191 us with a bound of
// 1,024), of 16,384 floats exp 127 us instead of 13; an add nothing
// measurable. Hence this bound. Values differ from the optimised build's
// only by the rounding of contracted multiply-adds (tanh: the last bit of
// a third of the elements, as accurate); like every small program never
// rebuilt, so an op gives the same bits on every call.
constexpr int64_t kTinyProgramMaxElements = 256;

// The XLA:CPU options of a tier (none for kOptimised), and the same as
// "name=value;...", part of the program's persistent-cache key.
std::vector<QuickCompileOption> tier_options(CompileTier tier);
std::string tier_options_text(CompileTier tier);

// The tier a text's size alone gives: kTiny for a tiny program, kSmall for
// another small one, else kOptimised (compile_tier() adds the quick state
// and the switch).
CompileTier size_tier(const std::string& text);

struct QuickCompileStats {
  int64_t quick_compiles = 0;   // programs compiled quick
  int64_t rebuilds = 0;         // of which rebuilt at the normal level
  double rebuild_seconds = 0;   // time those rebuilds took
  int64_t small_compiles = 0;   // programs compiled as small ones (tiny ones included)
  int64_t tiny_compiles = 0;    // of which as tiny ones
};
QuickCompileStats quick_compile_stats();
void note_quick_compile();
void note_rebuild(double seconds);
void note_small_compile(bool tiny);

}  // namespace torch_tpu::runtime
