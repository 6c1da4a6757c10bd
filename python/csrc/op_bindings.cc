// Hand-written bindings of tensor-core functions outside the op list's
// generated ones (op_bindings_generated.cc): views with their own geometry
// (as_strided, unbind), scatter and masked updates, nonzero, mv, closeness
// tests and the random fills, under trainrun._C._ops; Python
// (trainrun/_ops_*.py) gives them PyTorch's names. Also the op list itself.
#include <pybind11/stl.h>

#include "python/csrc/bindings.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"

namespace trainrun {
namespace python {

using release = py::call_guard<py::gil_scoped_release>;

void bind_ops(py::module_& m) {
  py::module_ o = m.def_submodule("_ops", "tensor-core ops that the Python package exposes under PyTorch's names");
  o.def(
      "as_strided",
      [](const Tensor& x, const IntList& sizes, const IntList& strides, std::optional<int64_t> offset) {
        return as_strided(x, sizes, strides, offset);
      },
      py::arg("input"), py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none());
  o.def(
      "unbind", [](const Tensor& x, int64_t d) { return unbind(x, d); }, py::arg("input"), py::arg("dim") = 0);
  o.def(
      "split_with_sizes", [](const Tensor& x, const IntList& s, int64_t d) { return split_with_sizes(x, s, d); },
      py::arg("input"), py::arg("split_sizes"), py::arg("dim") = 0);
  o.def(
      "unflatten", [](const Tensor& x, int64_t d, const IntList& s) { return unflatten(x, d, s); }, py::arg("input"),
      py::arg("dim"), py::arg("sizes"));
  o.def(
      "scatter_add",
      [](const Tensor& x, int64_t d, const Tensor& i, const Tensor& src) { return scatter_add(x, d, i, src); },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"), release());
  o.def(
      "scatter_value",
      [](const Tensor& x, int64_t d, const Tensor& i, py::object v) { return scatter(x, d, i, to_scalar(v)); },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("value"));
  o.def(
      "masked_fill_",
      [](py::object x, const Tensor& mask, py::object v) {
        masked_fill_(x.cast<Tensor&>(), mask, to_scalar(v));
        return x;  // (the caller's object, as PyTorch's)
      },
      py::arg("input"), py::arg("mask"), py::arg("value"));
  o.def(
      "nonzero", [](const Tensor& x) { return nonzero(x); }, py::arg("input"), release());
  o.def(
      "mv", [](const Tensor& a, const Tensor& v) { return mv(a, v); }, py::arg("input"), py::arg("vec"), release());
  o.def(
      "isclose",
      [](const Tensor& a, const Tensor& b, double rtol, double atol, bool nan) { return isclose(a, b, rtol, atol, nan); },
      py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8, py::arg("equal_nan") = false,
      release());
  o.def(
      "allclose",
      [](const Tensor& a, const Tensor& b, double rtol, double atol, bool nan) { return allclose(a, b, rtol, atol, nan); },
      py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8, py::arg("equal_nan") = false,
      release());
  // Random fills: from `generator` (a trainrun Generator's C++ object), or the default one when None.
  o.def(
      "uniform_",
      [](Tensor& t, double from, double to, std::shared_ptr<Generator> g) { return uniform_(t, from, to, g.get()); },
      py::arg("input"), py::arg("from") = 0.0, py::arg("to") = 1.0, py::arg("generator") = nullptr, release());
  o.def(
      "normal_",
      [](Tensor& t, double mean, double std, std::shared_ptr<Generator> g) { return normal_(t, mean, std, g.get()); },
      py::arg("input"), py::arg("mean") = 0.0, py::arg("std") = 1.0, py::arg("generator") = nullptr, release());
  o.def(
      "random_piece_",
      [](Tensor& t, bool normal, double a, double b, const IntList& global_sizes, const IntList& offsets) {
        return random_piece_(t, normal, a, b, global_sizes, offsets);
      },
      py::arg("input"), py::arg("normal"), py::arg("a"), py::arg("b"), py::arg("global_sizes"), py::arg("offsets"),
      release());
  o.def(
      "bernoulli_", [](Tensor& t, double p, std::shared_ptr<Generator> g) { return bernoulli_(t, p, g.get()); },
      py::arg("input"), py::arg("p") = 0.5, py::arg("generator") = nullptr, release());
  o.def(
      "random_",
      [](Tensor& t, int64_t low, int64_t high, std::shared_ptr<Generator> g) { return random_(t, low, high, g.get()); },
      py::arg("input"), py::arg("low"), py::arg("high"), py::arg("generator") = nullptr, release());
  o.def(
      "randperm", [](int64_t n, std::shared_ptr<Generator> g) { return randperm(n, g.get()); }, py::arg("n"),
      py::arg("generator") = nullptr, release());
  o.def(
      "rms_norm",
      [](const Tensor& x, const IntList& shape, const Tensor& w, double eps) {
        return std::get<0>(rms_norm(x, shape, w, eps));
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight"), py::arg("eps"), release());
  // The op list (tensor/ops.yaml) as data: the package checks its bindings against it and DTensor reads its tags.
  m.def("_op_list", [] {
    py::list entries;
    for (const OpListEntry& e : op_list()) {
      py::list tags;
      const std::pair<bool, const char*> flags[] = {{e.pointwise, "pointwise"},
                                                    {e.view, "view"},
                                                    {e.device_generic, "device_generic"},
                                                    {e.nondifferentiable, "nondifferentiable"},
                                                    {e.no_grad, "no_grad"}};
      for (const auto& [on, tag] : flags)
        if (on) tags.append(tag);
      py::dict d;
      d["name"] = e.name;
      d["schema"] = e.schema;
      d["tags"] = tags;
      d["python_name"] = e.python_name;
      d["python"] = e.python;
      d["binding"] = e.binding;
      entries.append(d);
    }
    return entries;
  });
  o.def("get_default_dtype", &default_float_dtype);
  o.def(
      "set_default_dtype",
      [](DType d) {
        TR_CHECK(is_floating(d), TypeError, "set_default_dtype(): only floating dtypes can be the default, got {}",
                 dtype_name(d));
        set_default_float_dtype(d);
      },
      py::arg("d"));
  o.def("promote_types", &promote_types, py::arg("type1"), py::arg("type2"));
  o.def("can_cast", &can_cast, py::arg("from_"), py::arg("to"));
}

}  // namespace python
}  // namespace trainrun
