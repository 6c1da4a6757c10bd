// Graph capture for trainrun.compile (python/trainrun/_compile.py): a
// CapturedGraph to record into and run, and the capture as a context
// manager; item() and numpy() tell a running capture that the program read
// a tensor's values (tensor_bindings.cc).
#include <pybind11/stl.h>

#include <memory>

#include "compile/captured_graph.h"
#include "compile/graph_capture.h"
#include "nn/module.h"
#include "python/csrc/bindings.h"

namespace trainrun {
namespace python {

namespace {

// The capture of one call, entered and left from Python.
class PyCapture {
 public:
  PyCapture(compile::CapturedGraph& graph, std::vector<Tensor> inputs) : graph_(graph), inputs_(std::move(inputs)) {}
  void enter() { capture_ = std::make_unique<compile::GraphCapture>(graph_, inputs_); }
  void exit() {
    if (capture_) {
      broken_ = capture_->broken();
      reason_ = capture_->break_reason();
    }
    capture_.reset();
  }
  void finish(const std::vector<Tensor>& outputs) {
    TR_CHECK(capture_ != nullptr, ValueError, "_GraphCapture.finish: the capture is not running");
    capture_->finish(outputs);
  }
  bool broken() const { return capture_ ? capture_->broken() : broken_; }
  std::string reason() const { return capture_ ? capture_->break_reason() : reason_; }

 private:
  compile::CapturedGraph& graph_;
  std::vector<Tensor> inputs_;
  std::unique_ptr<compile::GraphCapture> capture_;
  bool broken_ = false;
  std::string reason_;
};

}  // namespace

void bind_compile(py::module_& m) {
  py::class_<compile::CapturedGraph>(m, "_CapturedGraph")
      .def(py::init<>())
      .def("run", &compile::CapturedGraph::run, py::arg("inputs"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("num_nodes", &compile::CapturedGraph::num_nodes)
      .def_property_readonly("num_inputs", &compile::CapturedGraph::num_inputs)
      .def_property_readonly("num_constants", &compile::CapturedGraph::num_constants)
      .def("__str__", &compile::CapturedGraph::to_string);
  py::class_<PyCapture>(m, "_GraphCapture")
      .def(py::init<compile::CapturedGraph&, std::vector<Tensor>>(), py::arg("graph"), py::arg("inputs"),
           py::keep_alive<1, 2>())
      .def("__enter__", [](PyCapture& c) { c.enter(); return &c; }, py::return_value_policy::reference)
      .def("__exit__", [](PyCapture& c, py::args) { c.exit(); return false; })
      .def("finish", &PyCapture::finish, py::arg("outputs"))
      .def_property_readonly("broken", &PyCapture::broken)
      .def_property_readonly("break_reason", &PyCapture::reason);
  // The guard on a compiled module's tensors: which TensorImpls (and storages) its parameters and buffers are now.
  m.def("_module_tensor_guard", [](const nn::Module& module) {
    std::vector<uintptr_t> ids;
    for (const auto& [name, t] : module.named_parameters()) {
      ids.push_back(reinterpret_cast<uintptr_t>(t.impl()));
      ids.push_back(t.defined() && t.impl()->storage() ? reinterpret_cast<uintptr_t>(t.impl()->storage()->data()) : 0);
    }
    for (const auto& [name, t] : module.named_buffers()) {
      ids.push_back(reinterpret_cast<uintptr_t>(t.impl()));
      ids.push_back(t.defined() && t.impl()->storage() ? reinterpret_cast<uintptr_t>(t.impl()->storage()->data()) : 0);
    }
    return py::tuple(py::cast(ids));
  });
  m.def("_note_graph_break", &compile::GraphCapture::note_graph_break, py::arg("reason"));
}

}  // namespace python
}  // namespace trainrun
