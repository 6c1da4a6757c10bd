// Autograd from Python: requires_grad, .grad, backward, grad, grad mode,
// tensor hooks (Python callables, called with the GIL taken).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "autograd/accumulate_grad.h"
#include "autograd/engine.h"
#include "autograd/functions/record.h"
#include "autograd/grad_mode.h"
#include "autograd/saved_tensor_hooks.h"
#include "compile/graph_capture.h"
#include "autograd/variable.h"
#include "autograd/view_history.h"
#include "python/csrc/bindings.h"
#include "tensor/graph_break.h"
#include "tensor/ops.h"

namespace trainrun {
namespace python {

struct HookFlag {
  bool active = true;
};


void bind_autograd(py::module_& m) {
  py::class_<Tensor> tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor
      .def_property(
          "requires_grad", [](const Tensor& t) { return requires_grad(t); },
          [](Tensor& t, bool on) { set_requires_grad(t, on); })
      .def(
          "requires_grad_",
          [](py::object self, bool on) {
            set_requires_grad(self.cast<Tensor&>(), on);
            return self;  // (the caller's object, as PyTorch's)
          },
          py::arg("requires_grad") = true)
      .def_property(
          "grad",
          [](const Tensor& t) -> py::object {
            Tensor g = grad(t);
            // A recording would keep this very tensor, where each backward makes a new one (or None).
            if (g.defined()) note_graph_break("the call read a tensor's .grad, which a replay would read stale");
            return g.defined() ? py::cast(g) : py::none();
          },
          [](const Tensor& t, py::object g) { set_grad(t, g.is_none() ? Tensor() : g.cast<Tensor>()); })
      .def_property_readonly("is_leaf", [](const Tensor& t) { return is_leaf(t); })
      .def_property_readonly("grad_fn_name",
                             [](const Tensor& t) -> py::object {
                               auto fn = grad_fn(t);
                               return fn ? py::cast(fn->name()) : py::none();
                             })
      // The tensor a view (made while autograd records) reads the storage of, as PyTorch's t._base; None otherwise.
      .def_property_readonly("_base",
                             [](const Tensor& t) -> py::object {
                               Tensor base = view_base(t);
                               return base.defined() ? py::cast(base) : py::none();
                             })
      .def("_is_view", [](const Tensor& t) { return view_base(t).defined(); })
      .def("retain_grad", [](const Tensor& t) { retain_grad(t); })
      .def_property_readonly("retains_grad",
                             [](const Tensor& t) {
                               const AutogradMeta* meta = autograd_meta(t);
                               return meta != nullptr && !is_leaf(t) && meta->retained_grad != nullptr;
                             })
      // hook(tensor) after the leaf's .grad has been accumulated (an optimizer step per parameter, in backward).
      .def("_register_post_accumulate_grad_hook",
           [](const Tensor& t, py::function hook_fn) {
             TR_CHECK(requires_grad(t) && is_leaf(t), Error,
                      "post accumulate grad hooks cannot be registered on non-leaf tensors or tensors that do not "
                      "require grad");
             auto hook = hold_python_callable(std::move(hook_fn));
             register_post_accumulate_grad_hook(t, [hook](const Tensor& leaf) {
               py::gil_scoped_acquire gil;
               (*hook)(leaf);
             });
           })
      .def("register_hook", [](const Tensor& t, py::function hook_fn) {
        auto hook = hold_python_callable(std::move(hook_fn));
        register_hook(t, [hook](const Tensor& g) -> Tensor {
          py::gil_scoped_acquire gil;
          py::object r = (*hook)(g);
          return r.is_none() ? Tensor() : r.cast<Tensor>();
        });
      });

  m.def(
      "backward",
      [](const Tensor& t, py::object gradient, bool retain_graph, bool create_graph) {
        Tensor g = gradient.is_none() ? Tensor() : gradient.cast<Tensor>();
        py::gil_scoped_release nogil;
        autograd::backward({t}, {g}, retain_graph, create_graph);
      },
      py::arg("tensor"), py::arg("gradient") = py::none(), py::arg("retain_graph") = false,
      py::arg("create_graph") = false);
  m.def(
      "grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const std::vector<py::object>& grads,
         bool retain_graph, bool create_graph, bool allow_unused) {
        TensorList grad_outputs;
        for (const py::object& g : grads) grad_outputs.push_back(g.is_none() ? Tensor() : g.cast<Tensor>());
        TensorList result;
        {
          py::gil_scoped_release nogil;
          result = autograd::grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused);
        }
        py::list out;  // an input the outputs do not reach (allow_unused): None, as in PyTorch
        for (const Tensor& g : result) out.append(g.defined() ? py::cast(g) : py::none());
        return out;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = std::vector<py::object>{},
      py::arg("retain_graph") = false, py::arg("create_graph") = false, py::arg("allow_unused") = false);
  // backward of several roots in one pass (each node runs once, after all its gradients arrived).
  m.def(
      "_backward_roots",
      [](const std::vector<Tensor>& roots, const std::vector<py::object>& grads, bool retain_graph, bool create_graph) {
        TensorList grad_roots;
        for (const py::object& g : grads) grad_roots.push_back(g.is_none() ? Tensor() : g.cast<Tensor>());
        py::gil_scoped_release nogil;
        autograd::backward(roots, grad_roots, retain_graph, create_graph);
      },
      py::arg("roots"), py::arg("grads"), py::arg("retain_graph") = false, py::arg("create_graph") = false);
  // A backward split in two (zero-bubble pipeline schedules): the input pass returns d(outputs)/d(inputs)
  // and a handle whose run() later accumulates the remaining (weight) gradients.
  py::class_<autograd::DeferredWeightGrads, std::shared_ptr<autograd::DeferredWeightGrads>>(m, "_DeferredWeightGrads")
      .def("run",
           [](autograd::DeferredWeightGrads& d) {
             py::gil_scoped_release nogil;
             d.run();
           })
      .def_property_readonly("done", &autograd::DeferredWeightGrads::done);
  m.def(
      "_backward_inputs",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
         const std::vector<Tensor>& grad_outputs) {
        py::gil_scoped_release nogil;
        return autograd::backward_inputs(outputs, inputs, grad_outputs);
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs"));
  // autograd.Function from Python: the outputs become outputs of a node whose
  // backward calls the Python `backward(*grads)` (with the GIL) and takes
  // one gradient (or None) per tensor input.
  // dirty: inputs forward wrote in place and returns (ctx.mark_dirty): those take the node's history themselves.
  m.def("_attach_function_node", [](const std::string& name, const std::vector<Tensor>& inputs,
                                    std::vector<Tensor> outputs, py::function backward_fn,
                                    const std::vector<Tensor>& dirty) {
    // A graph replays ops, not this node: a capture that meets one must not be replayed.
    compile::GraphCapture::note_graph_break("an autograd.Function ran (its backward is Python code the graph cannot replay)");
    std::vector<IntList> shapes;
    std::vector<DType> dtypes;
    for (const Tensor& d : dirty)
      TR_CHECK(!(is_leaf(d) && requires_grad(d)), ValueError,
               "{}: a leaf Variable that requires grad is being used in an in-place operation (mark_dirty)", name);
    for (Tensor& o : outputs) {
      const bool is_dirty = std::any_of(dirty.begin(), dirty.end(), [&](const Tensor& d) { return o.is_same(d); });
      for (const Tensor& i : inputs)
        if (o.is_same(i) && !is_dirty) o = alias(detach(o));  // an input returned as is gets its own history
      shapes.push_back(o.sizes());
      dtypes.push_back(o.dtype());
    }
    auto fn = hold_python_callable(std::move(backward_fn));
    const size_t n_inputs = inputs.size();
    MultiFormula formula = [fn, shapes, dtypes, n_inputs, name](const TensorList& grads, const TensorList&) {
      py::gil_scoped_acquire gil;
      py::tuple args(shapes.size());
      for (size_t k = 0; k < shapes.size(); ++k) {
        Tensor g = k < grads.size() ? grads[k] : Tensor();
        args[k] = py::cast(g.defined() ? g : zeros(shapes[k], dtypes[k]));  // materialized, as PyTorch's default
      }
      py::object result = (*fn)(*args);
      py::tuple r = py::isinstance<py::tuple>(result) ? result.cast<py::tuple>() : py::make_tuple(result);
      TR_CHECK(r.size() == n_inputs, ValueError, "{}.backward returned {} gradients, but forward took {} tensor inputs",
               name, r.size(), n_inputs);
      TensorList out;
      for (py::handle h : r) out.push_back(h.is_none() ? Tensor() : h.cast<Tensor>());
      return out;
    };
    auto node =
        std::make_shared<FormulaNode>(name + "Backward", std::move(formula), static_cast<uint32_t>(outputs.size()),
                                      /*numbered=*/false);  // (PyTorch names a Function's node ClassNameBackward)
    connect(*node, inputs, {});
    for (size_t k = 0; k < outputs.size(); ++k)
      if (is_floating(outputs[k].dtype())) set_history(outputs[k], node, static_cast<uint32_t>(k));
    return outputs;
  }, py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("backward"),
        py::arg("dirty") = std::vector<Tensor>{});
  // Runs fn (a Python callable, with the GIL) once the running backward pass has finished: what FSDP waits
  // for its last reduce-scatter with. Raises outside a backward pass.
  m.def("_queue_callback", [](py::function fn) {
    auto callback = hold_python_callable(std::move(fn));
    autograd::queue_callback([callback] {
      py::gil_scoped_acquire gil;
      (*callback)();
    });
  });
  // torch.autograd.graph.saved_tensors_hooks: pack(tensor) -> any object, unpack(object) -> tensor. The object
  // lives in C++ until backward (or the graph is freed); it is let go with the GIL held.
  m.def("_push_saved_tensors_hooks", [](py::function pack_fn, py::function unpack_fn) {
    auto pack = hold_python_callable(std::move(pack_fn));
    auto unpack = hold_python_callable(std::move(unpack_fn));
    auto hooks = std::make_shared<SavedTensorHooks>();
    hooks->pack = [pack](const Tensor& t) -> std::shared_ptr<void> {
      py::gil_scoped_acquire gil;
      py::object packed = (*pack)(t);
      return std::shared_ptr<void>(new py::object(std::move(packed)), [](void* p) {
        auto* o = static_cast<py::object*>(p);
        if (!Py_IsInitialized()) {
          o->release();
          delete o;
          return;
        }
        py::gil_scoped_acquire gil;
        delete o;
      });
    };
    hooks->unpack = [unpack](const std::shared_ptr<void>& packed) -> Tensor {
      py::gil_scoped_acquire gil;
      py::object t = (*unpack)(*static_cast<py::object*>(packed.get()));
      TR_CHECK(py::isinstance<Tensor>(t), TypeError,
               "saved_tensors_hooks: the unpack hook must return a tensor, got {}",
               std::string(py::str(t.get_type().attr("__name__"))));
      return t.cast<Tensor>();
    };
    push_saved_tensor_hooks(std::move(hooks));
  });
  m.def("_push_saved_tensors_hooks_disabled", [](const std::string& message) {
    auto hooks = std::make_shared<SavedTensorHooks>();
    hooks->disabled_message = message;
    push_saved_tensor_hooks(std::move(hooks));
  });
  m.def("_pop_saved_tensors_hooks", [] { pop_saved_tensor_hooks(); });
  // tensor.grad_fn: the node that made a tensor, as torch.autograd.graph.Node: name(), next_functions (the
  // nodes its input gradients go to, with the input slot: AccumulateGrad for a leaf, whose .variable is the
  // leaf), register_hook / register_prehook. Compared and hashed by the node.
  // A node hook's switch: its handle's remove() turns it off (C++ nodes keep their hooks).
  py::class_<HookFlag, std::shared_ptr<HookFlag>>(m, "_HookFlag")
      .def(py::init<>())
      .def("remove", [](HookFlag& f) { f.active = false; });
  py::class_<Node, std::shared_ptr<Node>>(m, "Node", py::dynamic_attr())
      .def("name", &Node::pytorch_name)
      .def_property_readonly("next_functions",
                             [](const Node& n) {
                               py::list out;
                               for (const Edge& e : n.next_edges())
                                 out.append(py::make_tuple(e.node ? py::cast(e.node) : py::none(), e.input_nr));
                               return py::tuple(out);
                             })
      .def_property_readonly("variable",
                             [](const Node& n) -> py::object {
                               auto* acc = dynamic_cast<const AccumulateGrad*>(&n);
                               TR_CHECK(acc != nullptr, TypeError, "{} has no attribute 'variable' (only "
                                        "AccumulateGrad, the node of a leaf, has one)", n.name());
                               return py::cast(acc->variable());
                             })
      .def("_register_hook",
           [](Node& n, py::function fn, std::shared_ptr<HookFlag> flag) {
             auto hook = hold_python_callable(std::move(fn));
             n.register_hook([hook, flag](const TensorList& grad_inputs, const TensorList& grad_outputs) {
               if (!flag->active) return;
               py::gil_scoped_acquire gil;
               auto as_tuple = [](const TensorList& ts) {
                 py::list l;
                 for (const Tensor& t : ts) l.append(t.defined() ? py::cast(t) : py::none());
                 return py::tuple(l);
               };
               (*hook)(as_tuple(grad_inputs), as_tuple(grad_outputs));
             });
           })
      .def("_register_prehook",
           [](Node& n, py::function fn, std::shared_ptr<HookFlag> flag) {
             auto hook = hold_python_callable(std::move(fn));
             n.register_prehook([hook, flag](const TensorList& grad_outputs) -> TensorList {
               if (!flag->active) return grad_outputs;
               py::gil_scoped_acquire gil;
               py::list l;
               for (const Tensor& t : grad_outputs) l.append(t.defined() ? py::cast(t) : py::none());
               py::object r = (*hook)(py::tuple(l));
               if (r.is_none()) return grad_outputs;
               TensorList out;
               for (py::handle h : r) out.push_back(h.is_none() ? Tensor() : h.cast<Tensor>());
               TR_CHECK(out.size() == grad_outputs.size(), ValueError,
                        "a node pre-hook returned {} gradients for {} outputs", out.size(), grad_outputs.size());
               return out;
             });
           })
      .def("__eq__", [](const Node& a, const Node& b) { return &a == &b; })
      .def("__hash__", [](const Node& n) { return std::hash<const void*>()(&n); })
      .def("__repr__", [](const Node& n) {
        return fmt::format("<{} object at {}>", n.pytorch_name(), static_cast<const void*>(&n));
      });
  m.def("_grad_fn_node", [](const Tensor& t) -> py::object {
    auto fn = grad_fn(t);
    return fn ? py::cast(fn) : py::none();
  });
  m.def("is_grad_enabled", [] { return GradMode::is_enabled(); });
  m.def("_is_inference_mode_enabled", [] { return InferenceMode::is_enabled(); });
  m.def("_set_inference_mode", [](bool on) { InferenceMode::set_enabled(on); });
  m.def("_is_inference", [](const Tensor& t) { return t.impl()->storage()->is_inference(); });
  m.def("set_grad_enabled", [](bool on) { GradMode::set_enabled(on); });
}

}  // namespace python
}  // namespace trainrun
