#pragma once
// The pieces of the trainrun._C extension module, one per area; module.cc
// calls them in order.
#include <pybind11/pybind11.h>

#include <memory>

#include "tensor/ivalue.h"
#include "tensor/scalar.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace python {

namespace py = pybind11;

void bind_tensor(py::module_& m);
void bind_storage(py::module_& m);
void bind_profiler(py::module_& m);
void bind_autograd(py::module_& m);
void bind_nn(py::module_& m);
void bind_distributed(py::module_& m);
void bind_cuda(py::module_& m);
void bind_ipc(py::module_& m);
void bind_compile(py::module_& m);  // after bind_cuda: it adds to _cuda
void bind_ops(py::module_& m);
// Backend kernels written in Python for built-in ops (torch.library's Library("aten", "IMPL")).
void bind_python_kernels(py::module_& m);
// A boxed argument as Python: None, a tensor (None when undefined), a number, a list, a str, a dtype, a device.
py::object ivalue_to_py(IValue& v);
// Generated from the op list (python/BUILD): trainrun.<name> and Tensor.<name> of its pointwise ops.
void bind_listed_ops(py::module_& m);
// Tensor's operators (+, *, <, &, ...) as direct CPython methods (tensor_operators.cc).
void bind_tensor_operators(py::module_& m);
// __torch_function__'s wrapper of the namespaces' functions and its per-thread state (torch_function.cc).
void bind_torch_function(py::module_& m);
// The metaclass Tensor is bound with: isinstance(dtensor, Tensor) holds (tensor_metaclass.cc); bind_tensor
// tells it which class is Tensor, which also defines _C._is_cpp_tensor (the check without tensor-likes).
py::object tensor_metaclass();
void note_tensor_type(py::module_& m, py::handle tensor_type);

// A Python callable that C++ keeps (a backward formula, a hook) and may drop
// on any thread, or while the GIL is released: the last reference is let go
// with the GIL held (after interpreter shutdown it is leaked instead).
inline std::shared_ptr<py::function> hold_python_callable(py::function f) {
  return std::shared_ptr<py::function>(new py::function(std::move(f)), [](py::function* p) {
    if (!Py_IsInitialized()) {
      p->release();
    } else {
      py::gil_scoped_acquire gil;
      delete p;
      return;
    }
    delete p;
  });
}

// None (the CPU), "cpu", "cuda:1", an int (that GPU) or a trainrun.device.
Device to_device(py::handle d);
// A Python bool, int or float as a Scalar (TypeError for anything else).
Scalar to_scalar(py::handle value);

}  // namespace python
}  // namespace trainrun
