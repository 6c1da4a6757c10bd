#pragma once
// The pieces of the trainrun._C extension module, one per area; module.cc
// calls them in order.
#include <pybind11/pybind11.h>

#include "tensor/scalar.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace python {

namespace py = pybind11;

void bind_tensor(py::module_& m);
void bind_autograd(py::module_& m);
void bind_nn(py::module_& m);
void bind_distributed(py::module_& m);
void bind_cuda(py::module_& m);
void bind_ops(py::module_& m);

// None (the CPU), "cpu", "cuda:1", an int (that GPU) or a trainrun.device.
Device to_device(py::handle d);
// A Python bool, int or float as a Scalar (TypeError for anything else).
Scalar to_scalar(py::handle value);

}  // namespace python
}  // namespace trainrun
