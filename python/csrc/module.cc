// trainrun._C: the C++ core as a Python extension module. The Python
// package (python/trainrun/) builds PyTorch's API on top of it.
#include "base/error.h"
#include "python/csrc/bindings.h"

#include <string>

namespace trainrun {
namespace python {

Scalar to_scalar(py::handle value) {
  if (py::isinstance<py::bool_>(value)) return Scalar(value.cast<bool>());
  if (py::isinstance<py::int_>(value)) return Scalar(value.cast<int64_t>());
  if (py::isinstance<py::float_>(value)) return Scalar(value.cast<double>());
  // A 0-dim tensor stands for its value, as PyTorch's argument parser reads it (x.fill_(t.argmax()),
  // torch.full(size, t)).
  if (py::isinstance<Tensor>(value)) {
    const Tensor& t = value.cast<const Tensor&>();
    if (t.dim() == 0) return to_scalar(value.attr("item")());
    throw TypeError(fmt::format("expected a number or a 0-dim tensor, got a tensor with {} dimensions", t.dim()));
  }
  // NumPy scalars (np.float32(2), np.int64(3), np.bool_): their Python value.
  if (py::hasattr(value, "dtype") && py::hasattr(value, "item") && !py::isinstance<py::sequence>(value) &&
      py::len(value.attr("shape")) == 0)
    return to_scalar(value.attr("item")());
  throw TypeError(fmt::format("expected a bool, int or float, got {}", std::string(py::str(py::type::of(value)))));
}

}  // namespace python
}  // namespace trainrun

namespace {
// A new exception class trainrun._C.<name> with the given base (a class or a
// tuple of classes). The reference returned is never released: the
// translator below uses the class until the interpreter exits.
PyObject* new_exception(pybind11::module_& m, const char* name, PyObject* bases) {
  std::string qualified = std::string("trainrun._C.") + name;
  PyObject* type = PyErr_NewException(qualified.c_str(), bases, nullptr);
  if (type == nullptr) throw pybind11::error_already_set();
  m.attr(name) = pybind11::handle(type);
  return type;
}
}  // namespace

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  m.doc() = "trainrun's C++ core";
  // trainrun's errors arrive as the matching Python exceptions;
  // OutOfMemoryError is trainrun.cuda.OutOfMemoryError, a RuntimeError.
  static py::exception<trainrun::OutOfMemoryError> oom(m, "OutOfMemoryError", PyExc_RuntimeError);
  // torch.distributed's error classes: DistError is a RuntimeError; a store's
  // timeout is a DistStoreError and a collective's a DistBackendError, both
  // also TimeoutError (trainrun's timeouts always were).
  static PyObject* dist_error = new_exception(m, "DistError", PyExc_RuntimeError);
  static PyObject* dist_backend_error = new_exception(m, "DistBackendError", dist_error);
  static PyObject* dist_store_error = new_exception(m, "DistStoreError", dist_error);
  new_exception(m, "DistNetworkError", dist_error);
  static PyObject* store_timeout = new_exception(
      m, "DistStoreTimeoutError", py::make_tuple(py::handle(dist_store_error), py::handle(PyExc_TimeoutError)).ptr());
  static PyObject* backend_timeout = new_exception(
      m, "DistBackendTimeoutError",
      py::make_tuple(py::handle(dist_backend_error), py::handle(PyExc_TimeoutError)).ptr());
  for (const char* name : {"DistError", "DistBackendError", "DistStoreError", "DistNetworkError"})
    m.attr(("_" + std::string(name)).c_str()) = m.attr(name);  // PyTorch's torch._C._DistStoreError, ...
  // An op's argument errors are ValueError/TypeError, and also RuntimeError: PyTorch raises RuntimeError for
  // most of them (shapes that do not broadcast, a view that cannot be taken, mismatched dtypes), and scripts
  // catch that.
  static PyObject* value_error = new_exception(
      m, "ValueError", py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_RuntimeError)).ptr());
  static PyObject* type_error = new_exception(
      m, "TypeError", py::make_tuple(py::handle(PyExc_TypeError), py::handle(PyExc_RuntimeError)).ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const trainrun::ValueError& e) {
      PyErr_SetString(value_error, e.what());
    } catch (const trainrun::TypeError& e) {
      PyErr_SetString(type_error, e.what());
    } catch (const trainrun::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const trainrun::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const trainrun::StoreTimeoutError& e) {
      PyErr_SetString(store_timeout, e.what());
    } catch (const trainrun::TimeoutError& e) {
      PyErr_SetString(backend_timeout, e.what());
    } catch (const trainrun::DistBackendError& e) {
      PyErr_SetString(dist_backend_error, e.what());
    } catch (const trainrun::OutOfMemoryError& e) {
      oom(e.what());
    } catch (const trainrun::CudaError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  trainrun::python::bind_cuda(m);  // first: the device type appears in later signatures
  trainrun::python::bind_tensor(m);
  trainrun::python::bind_storage(m);
  trainrun::python::bind_profiler(m);
  trainrun::python::bind_ipc(m);
  trainrun::python::bind_compile(m);
  trainrun::python::bind_ops(m);
  trainrun::python::bind_python_kernels(m);
  trainrun::python::bind_listed_ops(m);
  trainrun::python::bind_tensor_operators(m);
  trainrun::python::bind_torch_function(m);
  trainrun::python::bind_autograd(m);
  trainrun::python::bind_nn(m);
  trainrun::python::bind_distributed(m);
}
