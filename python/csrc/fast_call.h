#pragma once
// The calling convention of the bindings generated from the op list: plain
// CPython vectorcall functions (METH_FASTCALL | METH_KEYWORDS) whose
// arguments are matched by a small parser here, as CPython's own functions
// match theirs, instead of pybind11's general dispatcher (overload records,
// argument vectors, a kwargs dict per call), which cost more than the op on
// a small tensor. Arguments are then converted by op_arguments.h.
#include <Python.h>

#include <cstdint>

#include "python/csrc/bindings.h"

namespace trainrun {
namespace python {

// A generated binding's parameters (Python names, in order).
struct ArgSpec {
  const char* fn;            // "add"
  const char* const* names;  // {"input", "other", "alpha", "out"}
  int count;                 // how many names
  int positional;            // how many may be given by position (those before `*`)
  uint64_t required;         // bit i: names[i] has no default
};

// Fills out[0..count) with borrowed references (nullptr: not given) from a
// vectorcall's arguments. Returns false with Python's TypeError set when the
// call does not fit: too many positional arguments, an unknown or repeated
// keyword, a required argument missing.
bool parse_args(const ArgSpec& spec, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** out);

// Sets the Python exception for the C++ exception being handled (through the
// module's registered translators, as pybind11's dispatcher does) and returns
// nullptr. Call it from a catch (...) block.
PyObject* raise_python_error();

// A module-level function and a Tensor method from generated vectorcall
// functions. `def` must outlive the module (a static).
void add_fast_function(py::module_& m, PyMethodDef* def);
void add_fast_method(py::handle tensor_class, PyMethodDef* def);

}  // namespace python
}  // namespace trainrun
