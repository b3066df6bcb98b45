// Capture and replay of a compiled graph call (docs/design.md, "torch.compile").
//
// A graph call run in Fused Eager becomes one trace. capture_begin/
// capture_end watch such a call; if its ops became exactly one trace whose
// every parameter is an input's storage buffer, a constant or a random key,
// and every output and input mutation is one of its results (or an input's
// storage), the result is a GraphReplay: later calls with the same input
// signature gather the input buffers, run the fused executable once and wrap
// its results into tensors, without dispatching a single op.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/deferred_checks.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {
struct CapturedOps;  // runtime/modes.h
}

namespace torch_tpu::exec {

class GraphReplay {
 public:
  // `inputs`: the call's arguments, undefined where one is not a tpu tensor
  // (same positions as at capture). Returns the tpu tensor outputs given to
  // capture_end, in order.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

  struct Param {
    enum Kind { kInput, kConstant, kRngKey, kDonor } kind;
    int input = -1;               // kInput: whose storage buffer
    hlo::TensorType type;         // kDonor: a recycled buffer the program writes a result into
    runtime::BufferRef constant;  // kConstant
    mutable at::Generator gen;    // kRngKey: a fresh key is drawn on every call (mutex() is non-const)
  };
  struct Storage {                // one storage behind one or more outputs
    int input = -1;               // an input's storage, or a new one:
    int result = -1;              // its buffer (-1: none, reads as zeros)
    size_t nbytes = 0;
    at::ScalarType buffer_dtype = at::ScalarType::Undefined;
  };
  struct Output {
    int storage;
    at::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset;
  };
  struct Write {                  // the graph replaced an input storage's buffer
    int input;
    int result;
    at::ScalarType buffer_dtype;
  };

  struct Check {                  // a device-side check's flag among the results
    int result;
    runtime::CheckRef check;
  };

  int device = 0;
  size_t num_inputs = 0;
  runtime::ExecutableRef exe;     // null: nothing to run
  // The captured ops: a chained replay appends them to the pending trace
  // instead of running `exe` (modes.h, defer_replay).
  std::shared_ptr<const runtime::CapturedOps> ops;
  std::vector<Param> params;
  std::vector<int> exe_args, exe_outputs;
  // exe arguments whose buffer the executable takes over (donation.h): each
  // is a written input's old buffer, copied first if anything else holds it.
  std::vector<int> donated;
  std::vector<Storage> storages;
  std::vector<Output> outputs;
  std::vector<Write> writes;
  std::vector<Check> checks;
  int64_t new_bytes = 0;          // bytes of the new storages (memory check)
  // With capture_begin(..., keep_text): the fused program's text (no
  // aliases; @main takes `params` in order and returns the results that
  // Storage::result and Write::result index) and those results' types.
  std::string text;
  std::vector<hlo::TensorType> result_types;
};

// Starts watching a graph call on `device`; `inputs` as for GraphReplay::run.
// Runs pending eager work first. `keep_text`: fill GraphReplay::text.
void capture_begin(const std::vector<at::Tensor>& inputs, int device, bool keep_text = false);
// `outputs`: the call's tpu tensor outputs. Returns the replay, or null and
// the reason in `why`.
std::shared_ptr<GraphReplay> capture_end(const std::vector<at::Tensor>& outputs, std::string* why);
void capture_abort();

}  // namespace torch_tpu::exec
