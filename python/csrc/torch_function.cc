// The hot half of __torch_function__, PyTorch's override protocol
// (trainrun/overrides.py is the rest). Every public function of trainrun's
// namespaces (trainrun, nn.functional, linalg, special, fft) is wrapped in a
// TorchFunction: a C callable that forwards its call to the function unless
// an argument's class defines __torch_function__ (a Tensor subclass, or any
// class that implements the protocol, as PyTorch's docs' ScalarTensor does)
// or a TorchFunctionMode is active. Then it hands the call to the Python
// handler (overrides._dispatch) with the public function as `func` (and the
// function itself, which the handler calls when the class is real PyTorch's
// Tensor, whose protocol is not for us: trainrun.from_dlpack(torch_tensor)).
//
// The check costs a type comparison per argument for plain tensors and
// numbers, which is why it is C: a Python wrapper added ~90 ns (10%) to
// trainrun.add on small tensors. Classes are looked up through CPython's
// method cache; a class whose __torch_function__ is
// _disabled_torch_function_impl (nn.Parameter's) never dispatches.
//
// State is per thread, as PyTorch's: how many DisableTorchFunctionSubclass /
// DisableTorchFunction blocks are open and how many modes are on the stack.
#include "python/csrc/bindings.h"

namespace trainrun {
namespace python {
namespace {

struct TorchFunctionState {
  int subclass_disabled = 0;  // DisableTorchFunctionSubclass (and DisableTorchFunction) blocks open
  int all_disabled = 0;       // DisableTorchFunction blocks open: modes are skipped too
  int modes = 0;              // TorchFunctionModes on this thread's stack
};
thread_local TorchFunctionState t_state;

PyObject* g_handler = nullptr;        // overrides._dispatch(public_api, original, args, kwargs)
PyObject* g_disabled_impl = nullptr;  // _C._disabled_torch_function_impl
PyTypeObject* g_tensor = nullptr;     // _C.Tensor: its own instances never dispatch

struct TorchFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* original;  // the function it wraps
  PyObject* module;    // the namespace it was installed in, and its name there:
  PyObject* name;      // the public API handed to __torch_function__ is what that name holds now
};

bool class_overrides(PyTypeObject* type) {
  if (type == g_tensor || !(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  static PyObject* key = PyUnicode_InternFromString("__torch_function__");
  PyObject* impl = _PyType_Lookup(type, key);  // borrowed
  return impl != nullptr && impl != g_disabled_impl;
}

// Does this argument, or an element of a list or tuple argument (one level, as PyTorch looks), override?
bool overrides(PyObject* arg) {
  PyTypeObject* type = Py_TYPE(arg);
  if (type == &PyList_Type || type == &PyTuple_Type) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(arg);
    PyObject** items = PySequence_Fast_ITEMS(arg);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (class_overrides(Py_TYPE(items[i]))) return true;
    return false;
  }
  return class_overrides(type);
}

PyObject* public_api(TorchFunction* self) {
  PyObject* now = PyObject_GetAttr(self->module, self->name);
  if (now != nullptr) return now;
  PyErr_Clear();
  Py_INCREF(self);
  return reinterpret_cast<PyObject*>(self);
}

PyObject* dispatch(TorchFunction* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  PyObject* tuple = PyTuple_New(n);
  if (tuple == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SET_ITEM(tuple, i, args[i]);
  }
  PyObject* kwargs = PyDict_New();
  if (kwargs == nullptr) {
    Py_DECREF(tuple);
    return nullptr;
  }
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[n + i]) != 0) {
      Py_DECREF(tuple);
      Py_DECREF(kwargs);
      return nullptr;
    }
  }
  PyObject* api = public_api(self);
  PyObject* result = PyObject_CallFunctionObjArgs(g_handler, api, self->original, tuple, kwargs, nullptr);
  Py_DECREF(api);
  Py_DECREF(tuple);
  Py_DECREF(kwargs);
  return result;
}

PyObject* torch_function_call(PyObject* obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<TorchFunction*>(obj);
  if (g_handler != nullptr) {
    const TorchFunctionState& s = t_state;
    if (s.modes > 0 && s.all_disabled == 0) return dispatch(self, args, nargsf, kwnames);
    if (s.subclass_disabled == 0) {
      const Py_ssize_t total = PyVectorcall_NARGS(nargsf) + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
      for (Py_ssize_t i = 0; i < total; ++i)
        if (overrides(args[i])) return dispatch(self, args, nargsf, kwnames);
    }
  }
  return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
}

void torch_function_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<TorchFunction*>(obj);
  PyObject_GC_UnTrack(obj);
  Py_CLEAR(self->original);
  Py_CLEAR(self->module);
  Py_CLEAR(self->name);
  Py_TYPE(obj)->tp_free(obj);
}

int torch_function_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<TorchFunction*>(obj);
  Py_VISIT(self->original);
  Py_VISIT(self->module);
  Py_VISIT(self->name);
  return 0;
}

// Attributes are the wrapped function's (__name__, __doc__, __module__, __signature__, ...), except
// __wrapped__ (the function itself) and what the wrapper's type defines (__call__, __reduce__, __class__).
PyObject* torch_function_getattr(PyObject* obj, PyObject* name) {
  auto* self = reinterpret_cast<TorchFunction*>(obj);
  if (PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0) {
    Py_INCREF(self->original);
    return self->original;
  }
  for (const char* own : {"__class__", "__call__", "__reduce__", "__reduce_ex__", "__get__"})
    if (PyUnicode_CompareWithASCIIString(name, own) == 0) return PyObject_GenericGetAttr(obj, name);
  return PyObject_GetAttr(self->original, name);
}

int torch_function_setattr(PyObject* obj, PyObject* name, PyObject* value) {
  return PyObject_SetAttr(reinterpret_cast<TorchFunction*>(obj)->original, name, value);
}

PyObject* torch_function_repr(PyObject* obj) { return PyObject_Repr(reinterpret_cast<TorchFunction*>(obj)->original); }

// Equal to, and hashing as, the function it wraps: tables keyed by a function before it was wrapped still find it.
Py_hash_t torch_function_hash(PyObject* obj) { return PyObject_Hash(reinterpret_cast<TorchFunction*>(obj)->original); }

PyObject* unwrapped(PyObject* o, PyTypeObject* type) {
  return PyObject_TypeCheck(o, type) ? reinterpret_cast<TorchFunction*>(o)->original : o;
}

PyObject* torch_function_richcompare(PyObject* a, PyObject* b, int op) {
  if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
  PyTypeObject* type = Py_TYPE(PyObject_TypeCheck(a, Py_TYPE(b)) ? b : a);
  const bool same = unwrapped(a, type) == unwrapped(b, type);
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

// Pickled by where it lives: overrides._resolve(module name, name).
PyObject* torch_function_reduce(PyObject* obj, PyObject*) {
  auto* self = reinterpret_cast<TorchFunction*>(obj);
  py::object resolve = py::module_::import("trainrun.overrides").attr("_resolve");
  py::object module_name = py::reinterpret_borrow<py::object>(self->module).attr("__name__");
  return py::make_tuple(resolve, py::make_tuple(module_name, py::reinterpret_borrow<py::object>(self->name)))
      .release()
      .ptr();
}

PyObject* torch_function_reduce_ex(PyObject* obj, PyObject*) { return torch_function_reduce(obj, nullptr); }

// A Python function's wrapper binds as a method when set on a class, as the function would.
PyObject* torch_function_descr_get(PyObject* obj, PyObject* instance, PyObject*) {
  if (instance == nullptr || instance == Py_None) {
    Py_INCREF(obj);
    return obj;
  }
  return PyMethod_New(obj, instance);
}

PyMethodDef torch_function_methods[] = {
    {"__reduce__", torch_function_reduce, METH_NOARGS, nullptr},
    {"__reduce_ex__", torch_function_reduce_ex, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject make_type(const char* name, bool binds) {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = name;
  t.tp_basicsize = sizeof(TorchFunction);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  t.tp_vectorcall_offset = offsetof(TorchFunction, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_dealloc = torch_function_dealloc;
  t.tp_traverse = torch_function_traverse;
  t.tp_getattro = torch_function_getattr;
  t.tp_setattro = torch_function_setattr;
  t.tp_repr = torch_function_repr;
  t.tp_hash = torch_function_hash;
  t.tp_richcompare = torch_function_richcompare;
  t.tp_methods = torch_function_methods;
  t.tp_doc = "A trainrun function that honours __torch_function__ (trainrun.overrides)";
  if (binds) t.tp_descr_get = torch_function_descr_get;
  return t;
}

PyTypeObject g_builtin_type = make_type("trainrun._C._TorchFunctionBuiltin", false);
PyTypeObject g_function_type = make_type("trainrun._C._TorchFunction", true);

py::object wrap(py::handle original, py::handle module, py::handle name) {
  PyTypeObject* type = Py_TYPE(original.ptr())->tp_descr_get != nullptr ? &g_function_type : &g_builtin_type;
  auto* self = PyObject_GC_New(TorchFunction, type);
  if (self == nullptr) throw py::error_already_set();
  self->vectorcall = torch_function_call;
  self->original = original.inc_ref().ptr();
  self->module = module.inc_ref().ptr();
  self->name = name.inc_ref().ptr();
  PyObject_GC_Track(self);
  return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(self));
}

}  // namespace

void bind_torch_function(py::module_& m) {
  for (PyTypeObject* type : {&g_builtin_type, &g_function_type})
    if (PyType_Ready(type) != 0) throw py::error_already_set();
  g_tensor = reinterpret_cast<PyTypeObject*>(py::type::of<Tensor>().ptr());
  m.def("_torch_function_wrapper", &wrap, py::arg("function"), py::arg("module"), py::arg("name"),
        "The function `function`, installed as module.<name>, honouring __torch_function__");
  m.def("_is_torch_function_wrapper", [](py::handle f) {
    return Py_TYPE(f.ptr()) == &g_builtin_type || Py_TYPE(f.ptr()) == &g_function_type;
  });
  m.def("_set_torch_function_handler", [](py::object handler) {
    Py_XDECREF(g_handler);
    g_handler = handler.release().ptr();
  });
  // What a class sets as its __torch_function__ to opt out (nn.Parameter): a builtin, so it never binds; called,
  // it runs func with subclass dispatch off.
  m.def(
      "_disabled_torch_function_impl",
      [](py::object func, py::object /*types*/, py::object args, py::object kwargs) {
        const int before = t_state.subclass_disabled++;
        try {
          py::object result = kwargs.is_none() ? func(*args) : func(*args, **kwargs);
          t_state.subclass_disabled = before;
          return result;
        } catch (...) {
          t_state.subclass_disabled = before;
          throw;
        }
      },
      py::arg("func"), py::arg("types"), py::arg("args") = py::tuple(), py::arg("kwargs") = py::none());
  g_disabled_impl = py::object(m.attr("_disabled_torch_function_impl")).release().ptr();
  m.def("_get_torch_function_state", [] {
    return py::make_tuple(t_state.subclass_disabled, t_state.all_disabled, t_state.modes);
  });
  m.def("_set_torch_function_state", [](int subclass_disabled, int all_disabled, int modes) {
    t_state = TorchFunctionState{subclass_disabled, all_disabled, modes};
  });
  m.def("_torch_function_subclass_enabled", [] { return t_state.subclass_disabled == 0; });
}

}  // namespace python
}  // namespace trainrun
