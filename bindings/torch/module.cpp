// loom_torch._C: what loom_torch/__init__.py registers as the "loom" backend.
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "bindings/torch/process_group.hpp"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Loom's torch.distributed backend (registered as \"loom\" by import loom_torch)";
  m.def("create_process_group", &loom::torch::ProcessGroupLoom::create, pybind11::arg("store"),
        pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
        "The process group torch.distributed.init_process_group(\"loom\", ...) makes");
}
