// Recompile visibility (TORCH_TPU_LOG_RECOMPILES=1, torch_tpu.recompile_log()).
//
// Whoever builds a new program (the op engine, the fused runtime, the
// torch.compile backend) knows why: which input changed since the previous
// program of the same op, op sequence or graph. It records that here; the XLA
// runtime's compile log line carries the reason of the compile in progress
// (CompileNote), and Python reads the counters and the last entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::runtime {

// Whether TORCH_TPU_LOG_RECOMPILES is set (and not "0").
bool log_recompiles();

// The reason of the compile this thread is about to ask the runtime for, set
// for the duration of one compile call (nested notes replace, then restore).
// `label` follows the program's name in the log line ("(#3 for this op)").
class CompileNote {
 public:
  CompileNote(std::string label, std::string reason);
  ~CompileNote();
  CompileNote(const CompileNote&) = delete;
  CompileNote& operator=(const CompileNote&) = delete;
  // The innermost note of this thread, or nullptr.
  static const CompileNote* current();
  const std::string& label() const { return label_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string label_, reason_;
  const CompileNote* prev_;
};

struct RecompileEntry {
  std::string kind;    // "op", "fused" or "graph"
  std::string what;    // aten::add.Tensor, "fused program of 3 ops: ...", a graph's name
  std::string reason;  // "first compile", "input 0 'self' shape [4] -> [8]", ...
  int64_t count = 0;   // programs of this op / op sequence / frame so far, this one included
  std::string how;     // "compile" (XLA compiled it), "load" (from the disk cache), "trace" (graph)
};

struct RecompileStats {
  int64_t programs = 0;    // entries recorded
  int64_t recompiles = 0;  // entries whose op / sequence / frame had compiled before (count > 1)
  int64_t op_recompiles = 0, fused_recompiles = 0, graph_recompiles = 0;
  int64_t op_reloads = 0;  // evicted op programs rebuilt for the same key (not recorded as entries)
};

// Appends to the log (the last 256 entries are kept) and counts.
void record_compile(RecompileEntry e);
void note_op_reload();
// The last `n` entries, oldest first.
std::vector<RecompileEntry> recent_compiles(size_t n);
RecompileStats recompile_stats();

}  // namespace torch_tpu::runtime
