// Graph capture for trainrun.compile (python/trainrun/_compile.py): a
// CapturedGraph to record into and run, and the capture as a context
// manager; item() and numpy() tell a running capture that the program read
// a tensor's values (tensor_bindings.cc).
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <tuple>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "compile/aot_model.h"
#include "compile/aot_package.h"
#include "compile/captured_graph.h"
#include "compile/graph_capture.h"
#include "compile/dead_code.h"
#include "compile/dynamic_shapes.h"
#include "compile/fused_kernel.h"
#include "compile/fusion.h"
#include "compile/gemm_epilogue.h"
#include "compile/joint_graph.h"
#include "compile/scalar_constants.h"
#include "nn/module.h"
#include "python/csrc/bindings.h"

namespace trainrun {
namespace python {

namespace {

// A custom op written in Python, as a graph node: calls fn(inputs) -> list of tensors, with the GIL.
class PyExternalCall : public compile::ExternalCall {
 public:
  PyExternalCall(std::string name, std::string key, py::function fn)
      : name_(std::move(name)), key_(std::move(key)), fn_(std::move(fn)) {}
  ~PyExternalCall() override {
    if (!Py_IsInitialized()) {
      fn_.release();  // (at interpreter exit: nothing left to decrement)
      return;
    }
    py::gil_scoped_acquire gil;
    fn_ = py::function();
  }
  std::string name() const override { return name_; }
  std::string key() const override { return key_.empty() ? name_ : key_; }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs) const override {
    py::gil_scoped_acquire gil;
    return fn_(inputs).cast<std::vector<Tensor>>();
  }

 private:
  std::string name_, key_;
  py::function fn_;
};

// The capture of one call, entered and left from Python.
class PyCapture {
 public:
  PyCapture(std::shared_ptr<compile::CapturedGraph> graph, std::vector<Tensor> inputs)
      : graph_(std::move(graph)), inputs_(std::move(inputs)) {}
  void enter() { capture_ = std::make_unique<compile::GraphCapture>(*graph_, inputs_); }
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
  // After finish: the joint forward/backward graph, or None with joint_reason saying why there is none.
  std::shared_ptr<compile::JointGraph> record_backward(const std::vector<Tensor>& outputs) {
    TR_CHECK(capture_ != nullptr, ValueError, "_GraphCapture.record_backward: the capture is not running");
    joint_reason_.clear();
    return compile::JointGraph::record(graph_, *capture_, inputs_, outputs, &joint_reason_);
  }
  const std::string& joint_reason() const { return joint_reason_; }
  bool broken() const { return capture_ ? capture_->broken() : broken_; }
  std::string reason() const { return capture_ ? capture_->break_reason() : reason_; }

 private:
  std::shared_ptr<compile::CapturedGraph> graph_;
  std::vector<Tensor> inputs_;
  std::string joint_reason_;
  std::unique_ptr<compile::GraphCapture> capture_;
  bool broken_ = false;
  std::string reason_;
};


// A node's constant argument as Python: as ivalue_to_py gives it, but a dtype by its name and a device as text
// (the graph table is plain data).
py::object constant_to_py(const IValue& value) {
  IValue& v = const_cast<IValue&>(value);
  const std::string type = v.type_name();
  if (type == "dtype") return py::make_tuple("dtype", dtype_name(v.get<DType>()));
  if (type == "Device") return py::make_tuple("device", v.get<Device>().str());
  return ivalue_to_py(v);
}

py::object slot_to_py(const compile::CapturedGraph::Slot& slot) {
  using Slot = compile::CapturedGraph::Slot;
  if (slot.kind == Slot::Value) return py::make_tuple("v", slot.value);
  if (slot.kind == Slot::ValueList) return py::make_tuple("l", slot.values);
  if (slot.constant.is_tensor() && !const_cast<IValue&>(slot.constant).get<Tensor>().defined())
    return py::make_tuple("u", py::none());  // an unset optional tensor (`out`)
  return py::make_tuple("c", constant_to_py(slot.constant));
}

// The program as a table, for trainrun.fx's Graph: {"inputs", "constants", "outputs": value ids, "nodes": [(kind,
// name, args, results, extra)], "meta": {id: (sizes, dtype name, device)}}. kind: "op", "alloc" (extra: its
// dtype and device), "fused" (extra: the ops it does) or "external" (a Python custom op).
py::dict graph_table(const compile::CapturedGraph& g) {
  py::dict table;
  table["inputs"] = g.inputs();
  std::vector<int> constants;
  for (const auto& [id, t] : g.constants()) constants.push_back(id);
  table["constants"] = constants;
  table["outputs"] = g.outputs();
  py::list nodes;
  for (const compile::CapturedGraph::Node& n : g.nodes()) {
    py::list args, results;
    py::object extra = py::none();
    const char* kind = "op";
    if (n.fused != nullptr) {
      kind = "fused";
      extra = py::cast(n.fused->ops);
    } else if (n.external != nullptr) {
      kind = "external";
    } else if (n.is_alloc()) {
      kind = "alloc";
      args.append(py::make_tuple("c", py::cast(n.alloc_sizes)));
      args.append(py::make_tuple("c", py::cast(n.alloc_strides)));
      extra = py::make_tuple(dtype_name(n.alloc_dtype), n.alloc_device.str());
    }
    for (const auto& slot : n.args) args.append(slot_to_py(slot));
    for (const auto& slot : n.results) results.append(slot_to_py(slot));
    nodes.append(py::make_tuple(kind, n.name(), args, results, extra));
  }
  table["nodes"] = nodes;
  py::dict meta;
  for (int id = 0; id < g.num_values(); ++id) {
    const compile::CapturedGraph::ValueMeta& m = g.meta(id);
    if (m.known) meta[py::int_(id)] = py::make_tuple(m.sizes, dtype_name(m.dtype), m.device.str());
  }
  table["meta"] = meta;
  return table;
}

}  // namespace

void bind_compile(py::module_& m) {
  py::class_<compile::CapturedGraph, std::shared_ptr<compile::CapturedGraph>>(m, "_CapturedGraph")
      .def(py::init<>())
      .def("run", [](const compile::CapturedGraph& g, const std::vector<Tensor>& inputs) { return g.run(inputs); },
           py::arg("inputs"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("num_nodes", &compile::CapturedGraph::num_nodes)
      .def_property_readonly("num_inputs", &compile::CapturedGraph::num_inputs)
      .def_property_readonly("num_constants", &compile::CapturedGraph::num_constants)
      .def("_table", &graph_table)
      .def("__str__", &compile::CapturedGraph::to_string);
  py::class_<compile::JointGraph, std::shared_ptr<compile::JointGraph>>(m, "_JointGraph")
      .def("run", &compile::JointGraph::run, py::arg("inputs"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("num_saved", &compile::JointGraph::num_saved)
      .def_property_readonly("forward_nodes", [](const compile::JointGraph& j) { return j.forward().num_nodes(); })
      .def_property_readonly("backward_nodes", [](const compile::JointGraph& j) { return j.backward().num_nodes(); })
      .def_property_readonly("fusion_note", &compile::JointGraph::fusion_note)
      .def("__str__", [](const compile::JointGraph& j) {
        return "forward (as run):\n" + j.forward_run().to_string() + "backward (as run):\n" +
               j.backward_run().to_string();
      });
  // A recording made under no_grad runs without autograd's graph, so its pointwise runs can be fused; so can
  // one made with grad enabled where nothing the call read or gave requires grad (grad_free: the caller's
  // finding; guards hold requires_grad, so every replay is such a call too).
  // (graph, note, the loops' C++ source): the fused graph, or the one given with why it is not.
  using Fused = std::tuple<std::shared_ptr<compile::CapturedGraph>, std::string, std::string>;
  m.def("_fuse_graph", [](const std::shared_ptr<compile::CapturedGraph>& g, bool grad_free) -> Fused {
    if (!compile::fusion_enabled()) return {g, "fusion off (TRAINRUN_COMPILE_FUSION=0)", ""};
    for (const auto& node : g->nodes())
      if (node.grad_enabled && !grad_free) return {g, "not fused: part of the call ran with grad enabled", ""};
    int dead = 0;
    int activations = 0;
    const std::shared_ptr<const compile::CapturedGraph> live =
        compile::fold_gemm_activations(compile::eliminate_dead_nodes(g, {}, &dead), {}, &activations);
    try {
      const compile::FusionResult f = compile::fuse_pointwise(live, {});
      // (const in C++: nothing changes a graph once made; Python only runs and prints it)
      return {std::const_pointer_cast<compile::CapturedGraph>(f.graph),
              fmt::format("{} dead ops dropped; {} activations in GEMMs; {} loops for {} ops", dead, activations,
                          f.loops, f.ops_fused),
              f.source};
    } catch (const ValueError& e) {
      return {g, fmt::format("not fused: {}", e.what()), ""};
    }
  }, py::arg("graph"), py::arg("grad_free") = false, py::call_guard<py::gil_scoped_release>());
  // trainrun.compile's recordings without a joint graph: numbers made once (compile/scalar_constants.h).
  // (graph, how many): the graph itself when none.
  m.def("_hoist_scalars", [](const std::shared_ptr<compile::CapturedGraph>& g) {
    int hoisted = 0;
    auto out = compile::hoist_scalar_constants(g, {}, &hoisted);
    return std::make_pair(std::const_pointer_cast<compile::CapturedGraph>(out), hoisted);
  }, py::arg("graph"), py::call_guard<py::gil_scoped_release>());
  m.def("_write_aot_package", [](const std::string& path, const compile::CapturedGraph& graph,
                                  const std::string& source, const std::vector<std::string>& input_names,
                                  const std::vector<std::string>& constant_names,
                                  const std::shared_ptr<compile::DynamicProgram>& dynamic) {
    compile::write_aot_package(path, graph, source, input_names, constant_names, dynamic.get());
  }, py::arg("path"), py::arg("graph"), py::arg("kernels_source"), py::arg("input_names"),
        py::arg("constant_names"), py::arg("dynamic") = nullptr, py::call_guard<py::gil_scoped_release>());
  // An exported program for varying sizes (trainrun.export's dynamic_shapes): compile/dynamic_shapes.h.
  using DimSpec = std::tuple<std::string, int64_t, int64_t>;                    // name, min, max
  using InputDimSpec = std::optional<std::tuple<int, int64_t, int64_t>>;        // None: static; (dim, mul, add)
  py::class_<compile::DynamicProgram, std::shared_ptr<compile::DynamicProgram>>(m, "_DynamicProgram")
      .def_static("generalize", [](const std::vector<DimSpec>& dims, const std::vector<std::vector<InputDimSpec>>& inputs,
                                   const std::vector<std::shared_ptr<compile::CapturedGraph>>& graphs,
                                   const std::vector<std::vector<int64_t>>& points, int degree, size_t base) {
        std::vector<compile::DynamicDim> d;
        for (const auto& [name, lo, hi] : dims) d.push_back({name, lo, hi});
        std::vector<std::vector<compile::InputDim>> in;
        for (const auto& list : inputs) {
          in.emplace_back();
          for (const auto& spec : list) {
            compile::InputDim x;
            if (spec) std::tie(x.dim, x.mul, x.add) = *spec;
            in.back().push_back(x);
          }
        }
        std::vector<std::shared_ptr<const compile::CapturedGraph>> g(graphs.begin(), graphs.end());
        return compile::DynamicProgram::generalize(std::move(d), std::move(in), g, points, degree, base);
      }, py::arg("dims"), py::arg("input_dims"), py::arg("graphs"), py::arg("points"), py::arg("degree"),
                  py::arg("base"), py::call_guard<py::gil_scoped_release>())
      .def("run", [](const compile::DynamicProgram& p, const std::vector<Tensor>& inputs,
                     const std::vector<std::string>& names) {
        const std::shared_ptr<const compile::CapturedGraph> g = p.at(p.bind(inputs, names));
        NoGradGuard no_grad;
        return g->run(inputs);
      }, py::arg("inputs"), py::arg("names"), py::call_guard<py::gil_scoped_release>())
      .def("graph_at", [](const compile::DynamicProgram& p, const std::vector<int64_t>& values) {
        return std::const_pointer_cast<compile::CapturedGraph>(p.at(values));
      }, py::arg("values"))
      .def_property_readonly("dims", [](const compile::DynamicProgram& p) {
        std::vector<DimSpec> out;
        for (const auto& d : p.dims()) out.emplace_back(d.name, d.min, d.max);
        return out;
      })
      .def_property_readonly("input_dims", [](const compile::DynamicProgram& p) {
        std::vector<std::vector<InputDimSpec>> out;
        for (const auto& list : p.input_dims()) {
          out.emplace_back();
          for (const auto& d : list)
            out.back().push_back(d.dim < 0 ? InputDimSpec() : InputDimSpec(std::make_tuple(d.dim, d.mul, d.add)));
        }
        return out;
      })
      .def_property_readonly("base", [](const compile::DynamicProgram& p) {
        return std::const_pointer_cast<compile::CapturedGraph>(p.base());
      })
      .def_property_readonly("num_size_dependent", &compile::DynamicProgram::num_size_dependent);
  py::class_<aot::Model, std::shared_ptr<aot::Model>>(m, "_AotModel")
      .def(py::init<const std::string&>(), py::arg("path"), py::call_guard<py::gil_scoped_release>())
      .def("run", &aot::Model::run, py::arg("inputs"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("input_names", [](const aot::Model& m) {
        std::vector<std::string> names;
        for (const auto& in : m.inputs()) names.push_back(in.name);
        return names;
      })
      .def_property_readonly("input_shapes", [](const aot::Model& m) {
        std::vector<std::vector<int64_t>> shapes;
        for (const auto& in : m.inputs()) shapes.emplace_back(in.sizes.begin(), in.sizes.end());
        return shapes;
      })
      .def_property_readonly("num_outputs", &aot::Model::num_outputs)
      .def_property_readonly("graph", [](const aot::Model& m) {
        return std::const_pointer_cast<compile::CapturedGraph>(m.graph());
      })
      .def_property_readonly("dynamic", [](const aot::Model& m) {
        return std::const_pointer_cast<compile::DynamicProgram>(m.dynamic());
      });
  m.def("_graph_with_constants", [](const compile::CapturedGraph& g, const std::vector<Tensor>& constants) {
    return g.with_constants(constants);
  });
  m.def("_graph_constants", [](const compile::CapturedGraph& g) {
    std::vector<Tensor> out;
    for (const auto& c : g.constants()) out.push_back(c.second);
    return out;
  });
  py::class_<PyCapture>(m, "_GraphCapture")
      .def(py::init<std::shared_ptr<compile::CapturedGraph>, std::vector<Tensor>>(), py::arg("graph"),
           py::arg("inputs"))
      .def("__enter__", [](PyCapture& c) { c.enter(); return &c; }, py::return_value_policy::reference)
      .def("__exit__", [](PyCapture& c, py::args) { c.exit(); return false; })
      .def("finish", &PyCapture::finish, py::arg("outputs"))
      .def("record_backward", &PyCapture::record_backward, py::arg("outputs"))
      .def_property_readonly("joint_reason", &PyCapture::joint_reason)
      .def_property_readonly("broken", &PyCapture::broken)
      .def_property_readonly("break_reason", &PyCapture::reason);
  m.def("_note_graph_break", &compile::GraphCapture::note_graph_break, py::arg("reason"));
  // trainrun.compile's tensor guards, exactly, as one bytes object to hash and compare: per tensor its rank,
  // sizes, strides, dtype, device and requires_grad (an undefined tensor: a marker). Building them as Python
  // tuples cost 1.6 us a tensor, which a small module paid at every call for each of its parameters.
  m.def("_tensor_guards", [](const std::vector<Tensor>& tensors) {
    std::vector<int64_t> words;
    words.reserve(tensors.size() * 10);
    for (const Tensor& t : tensors) {
      if (!t.defined()) {
        words.push_back(-1);
        continue;
      }
      words.push_back(t.dim());
      words.insert(words.end(), t.sizes().begin(), t.sizes().end());
      words.insert(words.end(), t.strides().begin(), t.strides().end());
      words.push_back(static_cast<int64_t>(t.dtype()) | (static_cast<int64_t>(t.device().type) << 8) |
                      (static_cast<int64_t>(t.device().index + 1) << 16) |
                      (static_cast<int64_t>(requires_grad(t)) << 40));
    }
    return py::bytes(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(int64_t));
  }, py::arg("tensors"));
  // A Python custom op inside a recording: begin, run it, end with a function that makes the call again.
  m.def("_capture_active", &compile::GraphCapture::active);
  m.def("_external_begin", &compile::GraphCapture::begin_external);
  m.def("_external_abort", &compile::GraphCapture::abort_external);
  // key: the op and its other arguments as text (two recordings of one program make the same calls).
  m.def("_external_end", [](const std::string& name, py::function fn, const std::vector<Tensor>& inputs,
                            const std::vector<Tensor>& outputs, const std::string& key) {
    compile::GraphCapture::end_external(std::make_shared<PyExternalCall>(name, key, std::move(fn)), inputs, outputs);
  }, py::arg("name"), py::arg("fn"), py::arg("inputs"), py::arg("outputs"), py::arg("key") = "");
}

}  // namespace python
}  // namespace trainrun
