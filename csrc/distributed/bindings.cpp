// torch_tpu._C._distributed: the creator torch.distributed calls for a
// tpu_dist group (torch_tpu/distributed/__init__.py registers it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/backend.h"
#include "runtime/collective_runtime.h"
#include "runtime/runtime.h"

namespace py = pybind11;

void init_distributed_bindings(py::module& m) {
  auto d = m.def_submodule("_distributed", "tpu_dist backend");
  d.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::vector<int64_t> global_ranks,
         double timeout_s, std::string group_name) {
        auto ms = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
        return torch_tpu::distributed::make_backend(store, rank, size, std::move(global_ranks), ms,
                                                    std::move(group_name));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("global_ranks"), py::arg("timeout_s"),
      py::arg("group_name"));
  // The job as the runtime sees it (starts the runtime).
  d.def("job", [] {
    const auto& j = torch_tpu::runtime::job();
    return py::make_tuple(j.active, j.rank, j.world, j.local_rank, j.coordinator);
  });
  d.def("job_failed", [] { return torch_tpu::runtime::job_failed(); });
  // The job read from the environment (starts nothing).
  d.def("job_from_env", [] {
    auto j = torch_tpu::runtime::job_from_env();
    return py::make_tuple(j.active, j.rank, j.world, j.local_rank, j.coordinator);
  });
}
