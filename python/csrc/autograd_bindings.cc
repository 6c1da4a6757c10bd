// Autograd from Python: requires_grad, .grad, backward, grad, grad mode,
// tensor hooks (Python callables, called with the GIL taken).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "python/csrc/bindings.h"

namespace trainrun {
namespace python {

void bind_autograd(py::module_& m) {
  py::class_<Tensor> tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor
      .def_property(
          "requires_grad", [](const Tensor& t) { return requires_grad(t); },
          [](Tensor& t, bool on) { set_requires_grad(t, on); })
      .def("requires_grad_", [](Tensor& t, bool on) { return set_requires_grad(t, on); }, py::arg("requires_grad") = true)
      .def_property(
          "grad",
          [](const Tensor& t) -> py::object {
            Tensor g = grad(t);
            return g.defined() ? py::cast(g) : py::none();
          },
          [](const Tensor& t, py::object g) { set_grad(t, g.is_none() ? Tensor() : g.cast<Tensor>()); })
      .def_property_readonly("is_leaf", [](const Tensor& t) { return is_leaf(t); })
      .def_property_readonly("grad_fn_name", [](const Tensor& t) -> py::object {
        auto fn = grad_fn(t);
        return fn ? py::cast(fn->name()) : py::none();
      })
      .def("retain_grad", [](const Tensor& t) { retain_grad(t); })
      .def("register_hook", [](const Tensor& t, py::function hook) {
        register_hook(t, [hook](const Tensor& g) -> Tensor {
          py::gil_scoped_acquire gil;
          py::object r = hook(g);
          return r.is_none() ? Tensor() : r.cast<Tensor>();
        });
      });

  m.def("backward",
        [](const Tensor& t, py::object gradient, bool retain_graph, bool create_graph) {
          Tensor g = gradient.is_none() ? Tensor() : gradient.cast<Tensor>();
          py::gil_scoped_release nogil;
          autograd::backward({t}, {g}, retain_graph, create_graph);
        },
        py::arg("tensor"), py::arg("gradient") = py::none(), py::arg("retain_graph") = false,
        py::arg("create_graph") = false);
  m.def("grad",
        [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, bool retain_graph,
           bool create_graph) {
          py::gil_scoped_release nogil;
          return autograd::grad(outputs, inputs, {}, retain_graph, create_graph);
        },
        py::arg("outputs"), py::arg("inputs"), py::arg("retain_graph") = false, py::arg("create_graph") = false);
  m.def("is_grad_enabled", [] { return GradMode::is_enabled(); });
  m.def("set_grad_enabled", [](bool on) { GradMode::set_enabled(on); });
}

}  // namespace python
}  // namespace trainrun
