// Bindings for torch_tpu/jax_op.py (lowering/jax_call.h): the Python side
// registers the op with torch.library and hands over jax's lowering; the
// program is built, cached and run by the engine like any op's.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <c10/util/Exception.h>

#include "lowering/jax_call.h"

namespace py = pybind11;
using namespace torch_tpu;

void init_jax_op_bindings(py::module& m) {
  // lower(name, spec, [(dims, element name)]) -> jax's StableHLO text.
  m.def("_set_jax_lowerer", [](py::function lower) {
    auto keep = std::make_shared<py::function>(std::move(lower));
    lowering::set_jax_lowerer([keep](const std::string& name, const std::string& spec,
                                     const std::vector<hlo::TensorType>& types) -> std::string {
      py::gil_scoped_acquire gil;
      py::list ins;
      for (const auto& t : types) ins.append(py::make_tuple(py::tuple(py::cast(t.dims)), hlo::element_name(t.element)));
      try {
        return (*keep)(name, spec, ins).cast<std::string>();
      } catch (py::error_already_set& e) {
        // The Python side has already named the op and its inputs.
        TORCH_CHECK(false, e.what());
      }
    });
  });
  m.def("_register_jax_op", [](const std::string& name) { lowering::register_jax_op(name); });
}
