// Tensor's arithmetic, comparison and bitwise operators (a + b, 2.0 * x,
// x < 0.5, mask & other): one-argument CPython methods (METH_O) that the
// interpreter's operator slots call directly. The other operand is a Tensor
// or a number (which promotes as a Python scalar does); anything else gives
// NotImplemented, so Python tries the other side (a DTensor's __radd__) and
// otherwise raises its own TypeError.
#include "python/csrc/fast_call.h"
#include "python/csrc/op_arguments.h"
#include "tensor/ops.h"

namespace trainrun {
namespace python {
namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);

template <BinaryFn F, bool reflected>
PyObject* binary_operator(PyObject* self_obj, PyObject* other_obj) {
  try {
    py::detail::make_caster<Tensor> self_caster, other_caster;
    if (!self_caster.load(self_obj, /*convert=*/false)) Py_RETURN_NOTIMPLEMENTED;
    const Tensor& self = py::detail::cast_op<Tensor&>(self_caster);
    Tensor other;
    if (other_caster.load(other_obj, /*convert=*/false)) {
      other = py::detail::cast_op<Tensor&>(other_caster);
    } else if (is_number(other_obj)) {
      other = wrapped_number(other_obj);
    } else {
      Py_RETURN_NOTIMPLEMENTED;
    }
    Tensor result;
    {
      MaybeReleaseGil nogil;
      release_if_large(nogil, self);
      result = reflected ? F(other, self) : F(self, other);
    }
    return py::cast(std::move(result)).release().ptr();
  } catch (...) {
    return raise_python_error();
  }
}

Tensor add_tt(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub_tt(const Tensor& a, const Tensor& b) { return sub(a, b); }
#define TR_BINARY_FN(name) \
  Tensor name##_tt(const Tensor& a, const Tensor& b) { return name(a, b); }
TR_BINARY_FN(mul)
TR_BINARY_FN(div)
TR_BINARY_FN(pow)
TR_BINARY_FN(remainder)
TR_BINARY_FN(bitwise_and)
TR_BINARY_FN(bitwise_or)
TR_BINARY_FN(bitwise_xor)
TR_BINARY_FN(eq)
TR_BINARY_FN(ne)
TR_BINARY_FN(lt)
TR_BINARY_FN(le)
TR_BINARY_FN(gt)
TR_BINARY_FN(ge)
#undef TR_BINARY_FN

#define TR_OPERATOR(python_name, fn, reflected) \
  { python_name, reinterpret_cast<PyCFunction>(&binary_operator<&fn, reflected>), METH_O, nullptr }
PyMethodDef operator_defs[] = {
    TR_OPERATOR("__add__", add_tt, false),
    TR_OPERATOR("__radd__", add_tt, true),
    TR_OPERATOR("__sub__", sub_tt, false),
    TR_OPERATOR("__rsub__", sub_tt, true),
    TR_OPERATOR("__mul__", mul_tt, false),
    TR_OPERATOR("__rmul__", mul_tt, true),
    TR_OPERATOR("__truediv__", div_tt, false),
    TR_OPERATOR("__rtruediv__", div_tt, true),
    TR_OPERATOR("__pow__", pow_tt, false),
    TR_OPERATOR("__rpow__", pow_tt, true),
    TR_OPERATOR("__mod__", remainder_tt, false),
    TR_OPERATOR("__rmod__", remainder_tt, true),
    TR_OPERATOR("__and__", bitwise_and_tt, false),
    TR_OPERATOR("__rand__", bitwise_and_tt, true),
    TR_OPERATOR("__or__", bitwise_or_tt, false),
    TR_OPERATOR("__ror__", bitwise_or_tt, true),
    TR_OPERATOR("__xor__", bitwise_xor_tt, false),
    TR_OPERATOR("__rxor__", bitwise_xor_tt, true),
    // Comparisons: Python reflects them itself (a number < x becomes x > number).
    TR_OPERATOR("__eq__", eq_tt, false),
    TR_OPERATOR("__ne__", ne_tt, false),
    TR_OPERATOR("__lt__", lt_tt, false),
    TR_OPERATOR("__le__", le_tt, false),
    TR_OPERATOR("__gt__", gt_tt, false),
    TR_OPERATOR("__ge__", ge_tt, false),
};
#undef TR_OPERATOR

}  // namespace

void bind_tensor_operators(py::module_& /*m*/) {
  py::handle tensor_class = py::type::of<Tensor>();
  for (PyMethodDef& def : operator_defs) add_fast_method(tensor_class, &def);
}

}  // namespace python
}  // namespace trainrun
