// torch_tpu._C bindings of loop bodies (runtime/regions.h, exec/region_loop.h),
// used by torch_tpu/control_flow.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <tuple>
#include <vector>

#include "device/storage.h"
#include "exec/capture_notes.h"
#include "exec/op_runner.h"
#include "exec/region_loop.h"
#include "lowering/context.h"
#include "runtime/regions.h"

namespace py = pybind11;
using namespace torch_tpu;

namespace {

// A tensor's 1-D storage type: what a body's parameter for it is.
hlo::TensorType flat_type(const at::Tensor& t) {
  return hlo::TensorType{lowering::element_type(t.scalar_type()), {device::storage_numel(t)}};
}

std::vector<hlo::TensorType> flat_types(const std::vector<at::Tensor>& ts) {
  std::vector<hlo::TensorType> out;
  for (const auto& t : ts) out.push_back(flat_type(t));
  return out;
}

// The values a body read from outside its placeholders, as 1-D tensors.
std::vector<at::Tensor> outside_tensors(const std::vector<const runtime::RegionTrace*>& regions, int device) {
  std::vector<at::Tensor> out;
  for (const auto* r : regions)
    for (size_t i = 0; i < r->outside.size(); ++i) {
      const runtime::BufferRef& buf = r->outside[i];
      // A scalar operand of the body, uploaded again as an array: a constant
      // of a graph being captured, as the op engine notes its own uploads.
      if (r->outside_scalar[i] && exec::capture::active()) exec::capture::note_constant(buf);
      at::ScalarType dtype = lowering::scalar_type(buf->type().element);
      at::Tensor t = exec::empty_tensor({buf->type().numel()}, dtype, static_cast<c10::DeviceIndex>(device));
      auto& sb = device::storage_buffer(t.storage());
      sb.buffer = buf;
      sb.dtype = dtype;
      out.push_back(std::move(t));
    }
  return out;
}

std::vector<runtime::BufferRef> buffers(const std::vector<at::Tensor>& ts) {
  std::vector<runtime::BufferRef> out;
  for (const auto& t : ts) out.push_back(device::storage_buffer(t.storage()).buffer);
  return out;
}

}  // namespace

void init_region_bindings(py::module& m) {
  py::class_<runtime::RegionTrace>(m, "_RegionTrace")
      .def_readonly("refused", &runtime::RegionTrace::refused)
      .def_readonly("text", &runtime::RegionTrace::text)
      .def_property_readonly("num_checks", [](const runtime::RegionTrace& r) { return r.checks.size(); });
  m.def("_region_begin", [](int device) { runtime::region_begin(device); });
  // `t` (a fresh contiguous tpu tensor) now stands for the loop's input `index`.
  m.def("_region_placeholder", [](const at::Tensor& t, int index) {
    auto& sb = device::storage_buffer(t.storage());
    sb.buffer = runtime::region_placeholder(flat_type(t), t.device().index(), index);
    sb.dtype = t.scalar_type();
  });
  m.def("_region_end", [](int device, const std::vector<at::Tensor>& outputs) {
    return runtime::region_end(device, buffers(outputs));
  });
  m.def("_region_abort", [](int device) { runtime::region_abort(device); });
  // The loop's check flags (its last results) are pending like any op's.
  m.def("_region_defer_checks", [](const runtime::RegionTrace& body, const std::vector<at::Tensor>& flags) {
    TORCH_CHECK(flags.size() == body.checks.size(), "torch_tpu: internal error: loop check flags");
    for (size_t i = 0; i < flags.size(); ++i)
      runtime::defer_check(flags[i].device().index(), device::storage_buffer(flags[i].storage()).buffer,
                           body.checks[i]);
  });
  // (module text, the tensors to pass after the loop's own operands)
  m.def("_scan_program", [](const runtime::RegionTrace& body, const std::vector<at::Tensor>& carries,
                            const std::vector<at::Tensor>& x_slices, const std::vector<at::Tensor>& additional,
                            int64_t length, int device) {
    std::string text = exec::scan_module(body, flat_types(carries), flat_types(x_slices), flat_types(additional), length);
    return std::make_tuple(text, outside_tensors({&body}, device));
  });
  m.def("_cond_program", [](const runtime::RegionTrace& on_true, const runtime::RegionTrace& on_false,
                            const std::vector<at::Tensor>& operands, int device) {
    std::string text = exec::cond_module(on_true, on_false, flat_types(operands));
    return std::make_tuple(text, outside_tensors({&on_true, &on_false}, device));
  });
  m.def("_while_program", [](const runtime::RegionTrace& cond, const runtime::RegionTrace& body,
                             const std::vector<at::Tensor>& carried, const std::vector<at::Tensor>& additional,
                             int device) {
    std::string text = exec::while_module(cond, body, flat_types(carried), flat_types(additional));
    return std::make_tuple(text, outside_tensors({&cond, &body}, device));
  });
}
