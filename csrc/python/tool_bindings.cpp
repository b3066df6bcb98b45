// Bindings of the tools: torch_tpu.export (torch_tpu/stablehlo_export.py,
// exec/export.h: capture one run of an exported graph and build its
// self-contained StableHLO module) and torch_tpu.estimate
// (torch_tpu/roofline.py, runtime/profiling.h: the programs a step ran).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "exec/export.h"
#include "exec/graph_replay.h"
#include "runtime/profiling.h"

namespace py = pybind11;
using namespace torch_tpu;

void init_tool_bindings(py::module& m) {
  m.def("_record_programs", [](bool on) { runtime::record_programs(on); });
  m.def("_take_recorded_programs", [] { return runtime::take_recorded_programs(); });
  m.def("_export_capture_begin", [](const std::vector<at::Tensor>& inputs, int device) {
    exec::capture_begin(inputs, device, /*keep_text=*/true);
  });
  m.def("_export_capture_abort", [] { exec::capture_abort(); });
  // Returns the module text, or raises with the reason the run cannot be exported.
  m.def("_export_capture_end", [](const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                                  const std::vector<bool>& is_arg) {
    std::string why;
    auto r = exec::capture_end(outputs, &why);
    TORCH_CHECK(r, "torch_tpu.export: the graph did not run as one tpu program: ", why);
    return exec::export_module(*r, inputs, is_arg);
  });
}
