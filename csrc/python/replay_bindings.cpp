// torch_tpu._C bindings of graph capture and replay (exec/graph_replay.h),
// used by torch_tpu/graph_replay.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "exec/graph_replay.h"
#include "exec/tensor_key.h"
#include "lowering/precision.h"
#include "runtime/compiler_options.h"
#include "runtime/modes.h"

namespace py = pybind11;
using namespace torch_tpu;

namespace {

// The call's arguments as GraphReplay sees them: tpu tensors, undefined for
// anything else.
std::vector<at::Tensor> tpu_tensors(const py::sequence& args) {
  std::vector<at::Tensor> out;
  out.reserve(args.size());
  for (const auto& h : args) {
    if (THPVariable_Check(h.ptr())) {
      const at::Tensor& t = THPVariable_Unpack(h.ptr());
      if (t.defined() && t.is_privateuseone()) {
        out.push_back(t);
        continue;
      }
    }
    out.emplace_back();
  }
  return out;
}

// Everything about the arguments that shapes the per-op programs (what
// op_runner keys on) and the trace: geometry, dtype, storage size, which
// arguments share a storage, and a tpu storage's buffer state. None when an
// argument cannot be keyed (a tensor without storage).
py::object replay_key(const py::sequence& args) {
  std::string k;
  k.reserve(48 * args.size());
  k += static_cast<char>('0' + static_cast<int>(lowering::matmul_precision()));
  // A user's XLA options make other programs (runtime/compiler_options.h).
  if (uint32_t options = runtime::compiler_options_id()) k += 'x' + std::to_string(options) + '|';
  exec::SeenStorages storages;
  for (const auto& h : args) {
    if (!THPVariable_Check(h.ptr())) {
      // Non-tensor arguments are graph constants: keyed by type and value.
      k += 'v';
      k += Py_TYPE(h.ptr())->tp_name;
      k += ':';
      k += py::repr(h).cast<std::string>();
      k += '|';
      continue;
    }
    const at::Tensor& t = THPVariable_Unpack(h.ptr());
    if (!t.defined()) {
      k += "U|";
      continue;
    }
    if (t.layout() != at::kStrided || !t.has_storage()) return py::none();
    k += 'T';
    exec::append_int(k, static_cast<int>(t.device().type()));
    exec::append_int(k, t.device().index());
    k += t.is_conj() ? 'c' : '-';
    k += t.is_neg() ? 'n' : '-';
    exec::append_tensor_layout(k, t, storages);
    k += '|';
  }
  return py::bytes(k);
}

}  // namespace

void init_replay_bindings(py::module& m) {
  m.def("_replay_key", &replay_key);
  m.def("_replay_capture_begin", [](const py::sequence& args, int device) {
    exec::capture_begin(tpu_tensors(args), device);
  });
  // Returns (replay, "") or (None, why not).
  m.def("_replay_capture_end", [](const std::vector<at::Tensor>& outputs) {
    std::string why;
    auto r = exec::capture_end(outputs, &why);
    return py::make_tuple(r ? py::cast(r) : py::none(), why);
  });
  m.def("_replay_capture_abort", [] { exec::capture_abort(); });
  m.def("_replay_capture_active", [] { return runtime::capture_active(); });
  m.def("_replay_chaining", [] { return runtime::replay_chaining(); });
  m.def("_set_replay_chaining", [](bool on) { runtime::set_replay_chaining(on); });
  m.def("_set_replay_chain_max_link_bytes",
        [](int64_t bytes) { return runtime::set_replay_chain_max_link_bytes(bytes); });
  py::class_<exec::GraphReplay, std::shared_ptr<exec::GraphReplay>>(m, "_GraphReplay")
      .def("run", [](const exec::GraphReplay& r, const py::sequence& args) { return r.run(tpu_tensors(args)); })
      .def_property_readonly("num_params", [](const exec::GraphReplay& r) { return r.params.size(); })
      .def_property_readonly("num_outputs", [](const exec::GraphReplay& r) { return r.outputs.size(); })
      .def_property_readonly("num_input_writes", [](const exec::GraphReplay& r) { return r.writes.size(); })
      .def_property_readonly("num_random_keys", [](const exec::GraphReplay& r) {
        size_t n = 0;
        for (const auto& p : r.params) n += p.kind == exec::GraphReplay::Param::kRngKey;
        return n;
      })
      .def_property_readonly("runs_program", [](const exec::GraphReplay& r) { return r.exe != nullptr; });
}
