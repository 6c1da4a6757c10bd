#include "python/csrc/fast_call.h"

#include <cstring>
#include <string>

namespace trainrun {
namespace python {

namespace {

// The position of keyword `key` among spec.names, or -1. NumPy's names are
// aliases, as in PyTorch's parser: axis= for dim=, keepdims= for keepdim=.
int find_keyword(const ArgSpec& spec, PyObject* key) {
  const char* name = PyUnicode_AsUTF8(key);
  if (name == nullptr) {
    PyErr_Clear();
    return -1;
  }
  if (std::strcmp(name, "axis") == 0) name = "dim";
  if (std::strcmp(name, "keepdims") == 0) name = "keepdim";
  for (int i = 0; i < spec.count; ++i)
    if (std::strcmp(name, spec.names[i]) == 0) return i;
  return -1;
}

}  // namespace

bool parse_args(const ArgSpec& spec, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** out) {
  if (nargs > spec.positional) {
    PyErr_Format(PyExc_TypeError, "%s() takes %d positional argument%s but %zd were given", spec.fn, spec.positional,
                 spec.positional == 1 ? "" : "s", nargs);
    return false;
  }
  for (int i = 0; i < spec.count; ++i) out[i] = i < nargs ? args[i] : nullptr;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    const int i = find_keyword(spec, key);
    if (i < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", spec.fn, key);
      return false;
    }
    if (out[i] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", spec.fn, spec.names[i]);
      return false;
    }
    out[i] = args[nargs + k];
  }
  for (int i = 0; i < spec.count; ++i) {
    if (out[i] == nullptr && (spec.required >> i & 1)) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", spec.fn, spec.names[i], i + 1);
      return false;
    }
  }
  return true;
}

PyObject* raise_python_error() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    if (py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators))
      return nullptr;
    if (py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators))
      return nullptr;
    PyErr_SetString(PyExc_SystemError, "an exception escaped trainrun's exception translators");
    return nullptr;
  }
}

void add_fast_function(py::module_& m, PyMethodDef* def) {
  py::object module_name = m.attr("__name__");
  PyObject* fn = PyCFunction_NewEx(def, nullptr, module_name.ptr());
  if (fn == nullptr) throw py::error_already_set();
  m.attr(def->ml_name) = py::reinterpret_steal<py::object>(fn);
}

void add_fast_method(py::handle tensor_class, PyMethodDef* def) {
  PyObject* descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(tensor_class.ptr()), def);
  if (descr == nullptr) throw py::error_already_set();
  py::setattr(tensor_class, def->ml_name, py::reinterpret_steal<py::object>(descr));
}

}  // namespace python
}  // namespace trainrun
