// The metaclass of trainrun._C.Tensor. It exists for one rule of PyTorch's:
// a tensor subclass written in Python over a local tensor (DTensor) is a
// torch.Tensor, so `isinstance(dtensor, torch.Tensor)` and
// `issubclass(DTensor, torch.Tensor)` hold. Such a class says so with the class
// attribute `_is_tensor_like = True` (it does not inherit from Tensor: its
// methods run its own sharding rules, never the C++ tensor's). The checks are
// C functions, as isinstance(x, Tensor) runs on every op's argument parsing.
#include "python/csrc/bindings.h"

namespace trainrun {
namespace python {
namespace {

PyTypeObject* g_tensor_type = nullptr;  // _C.Tensor, once bound

// Does class `cls` (or a base) declare `_is_tensor_like = True`? (A lookup in
// the MRO's dicts: no attribute error raised and cleared for the common no.)
bool declares_tensor_like(PyTypeObject* cls) {
  static PyObject* name = PyUnicode_InternFromString("_is_tensor_like");
  PyObject* value = _PyType_Lookup(cls, name);  // borrowed
  return value == Py_True;
}

PyObject* tensor_meta_instancecheck(PyObject* cls, PyObject* obj) {
  if (PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(cls))) Py_RETURN_TRUE;
  // Only Tensor itself takes tensor-likes: a DTensor is not an instance of a subclass (Parameter has its own rule).
  if (reinterpret_cast<PyTypeObject*>(cls) == g_tensor_type && declares_tensor_like(Py_TYPE(obj))) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

PyObject* tensor_meta_subclasscheck(PyObject* cls, PyObject* sub) {
  if (!PyType_Check(sub)) {
    PyErr_SetString(PyExc_TypeError, "issubclass() arg 1 must be a class");
    return nullptr;
  }
  auto* sub_type = reinterpret_cast<PyTypeObject*>(sub);
  if (PyType_IsSubtype(sub_type, reinterpret_cast<PyTypeObject*>(cls))) Py_RETURN_TRUE;
  if (reinterpret_cast<PyTypeObject*>(cls) == g_tensor_type && declares_tensor_like(sub_type)) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

// _C._is_cpp_tensor(obj): the core's own tensor (Tensor or a Python subclass: Parameter), not a tensor-like
// wrapper. The package's code asks this where a DTensor must take its own path (isinstance would say yes).
PyObject* is_cpp_tensor(PyObject*, PyObject* obj) {
  return PyBool_FromLong(g_tensor_type != nullptr && PyObject_TypeCheck(obj, g_tensor_type));
}

// _C._tensor_is_initialized(obj): whether a Tensor (subclass) instance holds a tensor yet. A subclass whose
// __new__ passes arguments up (PyTorch's `super().__new__(cls, data)`) and whose __init__ does not call
// Tensor.__init__ is made by pybind11's __new__, which holds nothing; the package then initialises it.
PyObject* tensor_is_initialized(PyObject*, PyObject* obj) {
  if (g_tensor_type == nullptr || !PyObject_TypeCheck(obj, g_tensor_type)) Py_RETURN_FALSE;
  auto* inst = reinterpret_cast<py::detail::instance*>(obj);
  for (const auto& v_h : py::detail::values_and_holders(inst))
    if (!v_h.holder_constructed()) Py_RETURN_FALSE;
  Py_RETURN_TRUE;
}

PyMethodDef g_tensor_is_initialized = {"_tensor_is_initialized", tensor_is_initialized, METH_O,
                                       "_tensor_is_initialized(obj): a Tensor instance that holds a tensor"};
PyMethodDef g_is_cpp_tensor = {"_is_cpp_tensor", is_cpp_tensor, METH_O,
                               "_is_cpp_tensor(obj): a trainrun._C.Tensor (or subclass), not a tensor-like (DTensor)"};
PyMethodDef g_instancecheck = {"__instancecheck__", tensor_meta_instancecheck, METH_O,
                               "isinstance(obj, Tensor): a tensor, or an object of a tensor-like class (DTensor)"};
PyMethodDef g_subclasscheck = {"__subclasscheck__", tensor_meta_subclasscheck, METH_O,
                               "issubclass(cls, Tensor): a Tensor subclass, or a tensor-like class (DTensor)"};

}  // namespace

py::object tensor_metaclass() {
  // A subclass of pybind11's own metaclass, so Tensor's bound methods and Python subclasses behave as before.
  auto* base = reinterpret_cast<PyObject*>(py::detail::get_internals().default_metaclass);
  py::object type = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&PyType_Type));
  py::object meta = type("TensorMeta", py::make_tuple(py::handle(base)), py::dict());
  auto* meta_type = reinterpret_cast<PyTypeObject*>(meta.ptr());
  for (PyMethodDef* def : {&g_instancecheck, &g_subclasscheck}) {
    py::object descr = py::reinterpret_steal<py::object>(PyDescr_NewMethod(meta_type, def));
    if (!descr) throw py::error_already_set();
    meta.attr(def->ml_name) = descr;
  }
  return meta;
}

void note_tensor_type(py::module_& m, py::handle tensor_type) {
  g_tensor_type = reinterpret_cast<PyTypeObject*>(tensor_type.ptr());
  py::object fn = py::reinterpret_steal<py::object>(PyCFunction_New(&g_is_cpp_tensor, nullptr));
  if (!fn) throw py::error_already_set();
  m.attr("_is_cpp_tensor") = fn;
  py::object initialized = py::reinterpret_steal<py::object>(PyCFunction_New(&g_tensor_is_initialized, nullptr));
  if (!initialized) throw py::error_already_set();
  m.attr("_tensor_is_initialized") = initialized;
}

}  // namespace python
}  // namespace trainrun
