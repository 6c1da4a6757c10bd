// nn.Module (subclassable from Python: a trampoline calls the Python
// forward), the C++ layers, losses, and the optimizers.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "autograd/grad_mode.h"
#include "nn/attention.h"
#include "nn/batch_norm.h"
#include "nn/conv_pool.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/module.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/sgd.h"
#include "python/csrc/bindings.h"
#include "tensor/graph_break.h"
#include "tensor/ops.h"

namespace trainrun {
namespace python {
namespace {

optim::ParamGroup& group_at(optim::Optimizer& o, size_t g) {
  TR_CHECK(g < o.param_groups().size(), IndexError, "param group {} out of range ({} groups)", g,
           o.param_groups().size());
  return o.param_groups()[g];
}


// A Python forward's result as a list: a tensor, or a tuple/list of tensors.
nn::TensorList to_tensor_list(const py::handle& out, const std::string& module) {
  if (py::isinstance<Tensor>(out)) return {out.cast<Tensor>()};
  if (py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out)) {
    nn::TensorList list;
    for (py::handle item : out) {
      TR_CHECK(py::isinstance<Tensor>(item), TypeError,
               "{}.forward returned a sequence holding a {}; C++ callers take tensors only", module,
               py::str(py::type::of(item).attr("__name__")).cast<std::string>());
      list.push_back(item.cast<Tensor>());
    }
    return list;
  }
  throw TypeError(fmt::format("{}.forward returned a {}; C++ callers take a tensor or a tuple of tensors", module,
                              py::str(py::type::of(out).attr("__name__")).cast<std::string>()));
}

// Lets Python classes override forward. When C++ calls a Python module (DDP
// wrapping it, a pipeline stage), the call goes through Python's __call__,
// so the module's Python hooks run as they would from Python.
class PyModule : public nn::Module {
 public:
  using nn::Module::Module;
  Tensor forward(const Tensor& x) override { PYBIND11_OVERRIDE(Tensor, nn::Module, forward, x); }
  nn::TensorList forward(const nn::TensorList& inputs) override {
    py::gil_scoped_acquire gil;
    if (!py::get_override(static_cast<const nn::Module*>(this), "forward")) return nn::Module::forward(inputs);
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
    py::object self = py::cast(static_cast<nn::Module*>(this), py::return_value_policy::reference);
    return to_tensor_list(self(*args), type_name());
  }
};

// What a C++ forward returns, for Python: one tensor, or a tuple of them.
py::object from_tensor_list(const nn::TensorList& outputs) {
  if (outputs.size() == 1) return py::cast(outputs[0]);
  py::tuple t(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) t[i] = py::cast(outputs[i]);
  return std::move(t);
}

nn::TensorList tensor_args(const py::args& args, const nn::Module& m, const char* what) {
  nn::TensorList list;
  for (py::handle a : args) {
    TR_CHECK(py::isinstance<Tensor>(a), TypeError, "{}.{}: C++ modules take tensors, got a {}", m.type_name(), what,
             py::str(py::type::of(a).attr("__name__")).cast<std::string>());
    list.push_back(a.cast<Tensor>());
  }
  return list;
}

using ModulePtr = std::shared_ptr<nn::Module>;

}  // namespace

void bind_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("nn", "modules, layers, losses");
  py::class_<nn::Module, PyModule, ModulePtr>(nn, "Module", py::dynamic_attr())
      .def(py::init([](const std::string& name) { return std::make_shared<PyModule>(name); }),
           py::arg("type_name") = "Module")
      .def("forward",
           [](nn::Module& self, py::args args) {
             nn::TensorList in = tensor_args(args, self, "forward");
             if (in.size() == 1) return py::cast(self.forward(in[0]));
             return from_tensor_list(self.forward(in));
           })
      .def("__call__",
           [](nn::Module& self, py::args args) {
             nn::TensorList in = tensor_args(args, self, "__call__");
             if (in.size() == 1) return py::cast(self(in[0]));
             return from_tensor_list(self(in));
           })
      .def(
          "register_parameter",
          [](nn::Module& self, const std::string& name, Tensor t, bool rg) {
            return self.register_parameter(name, t, rg);
          },
          py::arg("name"), py::arg("tensor"), py::arg("requires_grad") = true)
      .def("register_buffer",
           [](nn::Module& self, const std::string& name, Tensor t) { return self.register_buffer(name, t); })
      .def("register_module",
           [](nn::Module& self, const std::string& name, ModulePtr child) { self.register_module(name, child); })
      .def("_unregister", [](nn::Module& self, const std::string& name) { return self.unregister(name); })
      .def("_replace_module",
           [](nn::Module& self, const std::string& name, ModulePtr child) { return self.replace_module(name, child); })
      .def("_param", [](nn::Module& self, const std::string& name) { return self.param(name); })
      // Puts t (any shape) in place of parameter `name`: tensor parallelism swaps in the local shards.
      .def("_replace_parameter",
           [](nn::Module& self, const std::string& name, Tensor t) { return self.replace_parameter(name, t, true); })
      .def("_buffer", [](nn::Module& self, const std::string& name) { return self.buffer(name); })
      // Puts t in place of buffer `name` (Module.to_empty).
      .def("_replace_buffer", [](nn::Module& self, const std::string& name, Tensor t) { self.buffer(name) = t; })
      .def(
          "named_parameters",
          [](const nn::Module& self, bool recurse, bool remove_duplicate) {
            return self.named_parameters(recurse, remove_duplicate);
          },
          py::arg("recurse") = true, py::arg("remove_duplicate") = true)
      .def(
          "parameters", [](const nn::Module& self, bool recurse) { return self.parameters(recurse); },
          py::arg("recurse") = true)
      .def(
          "named_buffers",
          [](const nn::Module& self, bool recurse, bool remove_duplicate) {
            return self.named_buffers(recurse, remove_duplicate);
          },
          py::arg("recurse") = true, py::arg("remove_duplicate") = true)
      .def("named_children", &nn::Module::named_children)
      .def(
          "train",
          [](nn::Module& self, bool on) {
            self.train(on);
            return &self;
          },
          py::arg("mode") = true, py::return_value_policy::reference)
      .def(
          "eval",
          [](nn::Module& self) {
            self.eval();
            return &self;
          },
          py::return_value_policy::reference)
      .def_property_readonly("training", &nn::Module::is_training)
      .def("zero_grad", &nn::Module::zero_grad, py::arg("set_to_none") = true)
      .def("state_dict", [](const nn::Module& self) { return self.state_dict(); })
      .def("load_state_dict", &nn::Module::load_state_dict, py::arg("state_dict"), py::arg("strict") = true)
      .def(
          "to",
          [](nn::Module& self, py::handle target) {
            // module.to(dtype) or module.to(device), as in PyTorch.
            if (py::isinstance<DType>(target)) {
              self.to(target.cast<DType>());
            } else {
              Device d = to_device(target);
              py::gil_scoped_release nogil;
              self.to(d);
            }
            return &self;
          },
          py::return_value_policy::reference)
      .def_property_readonly("type_name", &nn::Module::type_name)
      // module.weight, module.bias, module.child: what is registered under the name.
      .def("__getattr__", [](nn::Module& self, const std::string& name) -> py::object {
        const Tensor* param = self.find_param(name);
        const bool is_param = param != nullptr;
        if (const Tensor* t = is_param ? param : self.find_buffer(name)) {
          // The object handed out for this tensor before, while it lives (module.weight is module.weight),
          // read from _handed_out's dict here: this runs for every self.weight in a forward, and the Python
          // path cost 2.6 us where PyTorch's attribute costs 0.3.
          static auto* handed_out = new py::object(
              py::module_::import("trainrun.nn._module").attr("_handed_out").attr("data"));  // never freed
          py::int_ key(reinterpret_cast<uintptr_t>(t->impl()));  // (its _cdata)
          if (PyObject* ref = PyDict_GetItemWithError(handed_out->ptr(), key.ptr())) {
            PyObject* known = PyWeakref_GetObject(ref);  // (borrowed; None once the object died)
            if (known != nullptr && known != Py_None) return py::reinterpret_borrow<py::object>(known);
          }
          if (PyErr_Occurred()) throw py::error_already_set();
          // Else made: as an nn.Parameter (the same tensor), so isinstance(module.weight, nn.Parameter) holds.
          static auto* as_parameter =
              new py::object(py::module_::import("trainrun.nn._module").attr("_as_parameter"));  // never freed
          static auto* as_buffer =
              new py::object(py::module_::import("trainrun.nn._module").attr("_as_buffer"));  // never freed
          return (is_param ? *as_parameter : *as_buffer)(py::cast(*t));
        }
        for (auto& [n, c] : self.named_children())
          if (n == name) return py::cast(c);
        throw py::attribute_error(
            fmt::format("'{}' has no attribute, parameter, buffer or child '{}'", self.type_name(), name));
      });

  py::class_<nn::Linear, nn::Module, std::shared_ptr<nn::Linear>>(nn, "Linear")
      .def(py::init<int64_t, int64_t, bool>(), py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features);
  py::class_<nn::ReLU, nn::Module, std::shared_ptr<nn::ReLU>>(nn, "ReLU").def(py::init<>());
  py::class_<nn::GELU, nn::Module, std::shared_ptr<nn::GELU>>(nn, "GELU")
      .def(py::init<std::string>(), py::arg("approximate") = "none");
  py::class_<nn::Tanh, nn::Module, std::shared_ptr<nn::Tanh>>(nn, "Tanh").def(py::init<>());
  py::class_<nn::Dropout, nn::Module, std::shared_ptr<nn::Dropout>>(nn, "Dropout")
      .def(py::init<double>(), py::arg("p") = 0.5);
  py::class_<nn::LayerNorm, nn::Module, std::shared_ptr<nn::LayerNorm>>(nn, "LayerNorm")
      .def(py::init([](py::object shape, double eps, bool affine) {
             IntList s = py::isinstance<py::int_>(shape) ? IntList{shape.cast<int64_t>()} : shape.cast<IntList>();
             return std::make_shared<nn::LayerNorm>(s, eps, affine);
           }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true)
      .def_readonly("normalized_shape", &nn::LayerNorm::normalized_shape)
      .def_readonly("eps", &nn::LayerNorm::eps)
      .def_readonly("elementwise_affine", &nn::LayerNorm::elementwise_affine);
  py::class_<nn::Embedding, nn::Module, std::shared_ptr<nn::Embedding>>(nn, "Embedding")
      .def(py::init<int64_t, int64_t>());
  py::class_<nn::Flatten, nn::Module, std::shared_ptr<nn::Flatten>>(nn, "Flatten")
      .def(py::init<int64_t, int64_t>(), py::arg("start_dim") = 1, py::arg("end_dim") = -1);
  py::class_<nn::Conv2d, nn::Module, std::shared_ptr<nn::Conv2d>>(nn, "Conv2d")
      // Sizes arrive as pairs (trainrun.nn.Conv2d turns ints and "same"/"valid" into them).
      .def(py::init([](int64_t in, int64_t out, IntList k, IntList stride, IntList padding, IntList dilation,
                       int64_t groups, bool bias) {
             return std::make_shared<nn::Conv2d>(in, out, k, stride, padding, dilation, groups, bias);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride"),
           py::arg("padding"), py::arg("dilation"), py::arg("groups"), py::arg("bias"))
      .def_readonly("in_channels", &nn::Conv2d::in_channels)
      .def_readonly("out_channels", &nn::Conv2d::out_channels)
      .def_readonly("groups", &nn::Conv2d::groups)
      .def_property_readonly("kernel_size", [](const nn::Conv2d& c) { return py::tuple(py::cast(c.kernel_size)); })
      .def_property_readonly("stride", [](const nn::Conv2d& c) { return py::tuple(py::cast(c.stride)); })
      .def_property_readonly("padding", [](const nn::Conv2d& c) { return py::tuple(py::cast(c.padding)); })
      .def_property_readonly("dilation", [](const nn::Conv2d& c) { return py::tuple(py::cast(c.dilation)); });
  py::class_<nn::BatchNorm, nn::Module, std::shared_ptr<nn::BatchNorm>>(nn, "_BatchNorm");
  py::class_<nn::BatchNorm1d, nn::BatchNorm, std::shared_ptr<nn::BatchNorm1d>>(nn, "BatchNorm1d")
      .def(py::init<int64_t, double, double, bool, bool>(), py::arg("num_features"), py::arg("eps") = 1e-5,
           py::arg("momentum") = 0.1, py::arg("affine") = true, py::arg("track_running_stats") = true);
  py::class_<nn::BatchNorm2d, nn::BatchNorm, std::shared_ptr<nn::BatchNorm2d>>(nn, "BatchNorm2d")
      .def(py::init<int64_t, double, double, bool, bool>(), py::arg("num_features"), py::arg("eps") = 1e-5,
           py::arg("momentum") = 0.1, py::arg("affine") = true, py::arg("track_running_stats") = true);
  py::class_<nn::MaxPool2d, nn::Module, std::shared_ptr<nn::MaxPool2d>>(nn, "MaxPool2d")
      .def(py::init([](IntList k, IntList s, IntList p, IntList d, bool ceil) {
             return std::make_shared<nn::MaxPool2d>(k, s, p, d, ceil);
           }),
           py::arg("kernel_size"), py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("ceil_mode"));
  py::class_<nn::AvgPool2d, nn::Module, std::shared_ptr<nn::AvgPool2d>>(nn, "AvgPool2d")
      .def(py::init([](IntList k, IntList s, IntList p, bool ceil, bool count_pad) {
             return std::make_shared<nn::AvgPool2d>(k, s, p, ceil, count_pad);
           }),
           py::arg("kernel_size"), py::arg("stride"), py::arg("padding"), py::arg("ceil_mode"),
           py::arg("count_include_pad"));
  py::class_<nn::Softmax, nn::Module, std::shared_ptr<nn::Softmax>>(nn, "Softmax").def(py::init<int64_t>());
  py::class_<nn::SiLU, nn::Module, std::shared_ptr<nn::SiLU>>(nn, "SiLU").def(py::init<>());
  py::class_<nn::RMSNorm, nn::Module, std::shared_ptr<nn::RMSNorm>>(nn, "RMSNorm")
      .def(py::init([](int64_t d, double eps) { return std::make_shared<nn::RMSNorm>(IntList{d}, eps); }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-6);
  py::class_<nn::CausalSelfAttention, nn::Module, std::shared_ptr<nn::CausalSelfAttention>>(nn, "CausalSelfAttention")
      .def(py::init<int64_t, int64_t>(), py::arg("d_model"), py::arg("num_heads"));
  py::class_<nn::TransformerBlock, nn::Module, std::shared_ptr<nn::TransformerBlock>>(nn, "TransformerBlock")
      .def(py::init<int64_t, int64_t>(), py::arg("d_model"), py::arg("num_heads"));
  py::class_<nn::ModuleList, nn::Module, std::shared_ptr<nn::ModuleList>>(nn, "ModuleList");
  py::class_<nn::Sequential, nn::ModuleList, std::shared_ptr<nn::Sequential>>(nn, "Sequential")
      .def(py::init([](py::args modules) {
        std::vector<ModulePtr> list;
        for (py::handle h : modules) list.push_back(h.cast<ModulePtr>());
        return std::make_shared<nn::Sequential>(list);
      }));

  // The losses with PyTorch's signatures; the deprecated size_average/reduce
  // are refused unless None.
  auto no_legacy = [](const char* fn, const py::object& size_average, const py::object& reduce) {
    if (!size_average.is_none() || !reduce.is_none())
      throw TypeError(fmt::format("{}: size_average and reduce are deprecated in PyTorch; use reduction=", fn));
  };
  nn.def(
      "cross_entropy",
      [no_legacy](const Tensor& x, const Tensor& y, std::optional<Tensor> weight, py::object size_average,
                  int64_t ignore_index, py::object reduce, const std::string& reduction, double smoothing) {
        no_legacy("cross_entropy", size_average, reduce);
        py::gil_scoped_release nogil;
        return cross_entropy(x, y, weight.value_or(Tensor()), reduction, ignore_index, smoothing);
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("size_average") = py::none(),
      py::arg("ignore_index") = -100, py::arg("reduce") = py::none(), py::arg("reduction") = "mean",
      py::arg("label_smoothing") = 0.0);
  nn.def(
      "nll_loss",
      [no_legacy](const Tensor& x, const Tensor& y, std::optional<Tensor> weight, py::object size_average,
                  int64_t ignore_index, py::object reduce, const std::string& reduction) {
        no_legacy("nll_loss", size_average, reduce);
        py::gil_scoped_release nogil;
        return nll_loss(x, y, weight.value_or(Tensor()), reduction, ignore_index);
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("size_average") = py::none(),
      py::arg("ignore_index") = -100, py::arg("reduce") = py::none(), py::arg("reduction") = "mean");
  using PointwiseLoss = Tensor (*)(const Tensor&, const Tensor&, const std::string&);
  for (auto [name, loss] : {std::pair<const char*, PointwiseLoss>{"mse_loss", &nn::mse_loss},
                            std::pair<const char*, PointwiseLoss>{"l1_loss", &nn::l1_loss}}) {
    nn.def(
        name,
        [no_legacy, name = name, loss = loss](const Tensor& x, const Tensor& y, py::object size_average,
                                              py::object reduce, const std::string& reduction) {
          no_legacy(name, size_average, reduce);
          return loss(x, y, reduction);
        },
        py::arg("input"), py::arg("target"), py::arg("size_average") = py::none(), py::arg("reduce") = py::none(),
        py::arg("reduction") = "mean");
  }

  static constexpr const char* kOptimizerStepBreak =
      "optimizer.step() runs eagerly: it reads each parameter's current .grad, its options (a scheduler changes lr) "
      "and the state its first step creates, which a replay would not see";
  py::module_ optim = m.def_submodule("optim", "optimizers");
  py::class_<optim::Optimizer>(optim, "Optimizer")
      .def("step",
           [](optim::Optimizer& o) {
             // Inside trainrun.compile's recording, a step is a graph break: a replay would read the .grad tensors
             // of the recording (each backward makes new ones), its options (a scheduler changes lr) and the
             // state as it was (the first step creates the momentum buffers), so it would silently be wrong.
             note_graph_break(kOptimizerStepBreak);
             py::gil_scoped_release nogil;
             o.step();
           })
      .def("zero_grad", &optim::Optimizer::zero_grad, py::arg("set_to_none") = true)
      // What trainrun.optim's param_groups view reads and writes (options by C++ name).
      .def("_group_count", [](optim::Optimizer& o) { return o.param_groups().size(); })
      .def("_group_params", [](optim::Optimizer& o, size_t g) { return group_at(o, g).params; })
      .def("_group_options", [](optim::Optimizer& o, size_t g) { return group_at(o, g).options; })
      .def("_set_group_option",
           [](optim::Optimizer& o, size_t g, const std::string& name, double value) {
             optim::ParamGroup& group = group_at(o, g);
             if (!group.options.count(name))
               throw py::key_error(fmt::format("param group {} has no option '{}'", g, name));
             group.options[name] = value;
           })
      .def("_add_param_group",
           [](optim::Optimizer& o, std::vector<Tensor> params, optim::Options options) {
             o.add_param_group({std::move(params), std::move(options)});
           })
      // (per-parameter state in group order, per-group options): trainrun.optim shapes it as PyTorch's.
      .def("_state_dict",
           [](const optim::Optimizer& o) {
             optim::OptimizerState st = o.state_dict();
             return std::make_pair(st.state, st.groups);
           })
      .def("_load_state_dict",
           [](optim::Optimizer& o, std::vector<std::map<std::string, Tensor>> state, std::vector<optim::Options> groups) {
             o.load_state_dict({std::move(state), std::move(groups)});
           });
  py::class_<optim::SGD, optim::Optimizer>(optim, "SGD")
      .def(py::init([](std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov) {
             optim::SGDOptions o;
             o.lr = lr, o.momentum = momentum, o.weight_decay = weight_decay, o.nesterov = nesterov;
             return std::make_unique<optim::SGD>(std::move(params), o);
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0,
           py::arg("nesterov") = false);
  auto adam_options = [](double lr, std::pair<double, double> betas, double eps, double wd, bool amsgrad) {
    optim::AdamOptions o;
    o.lr = lr, o.beta1 = betas.first, o.beta2 = betas.second, o.eps = eps, o.weight_decay = wd, o.amsgrad = amsgrad;
    return o;
  };
  py::class_<optim::Adam, optim::Optimizer>(optim, "Adam")
      .def(py::init([adam_options](std::vector<Tensor> p, double lr, std::pair<double, double> b, double eps, double wd,
                                   bool ams) {
             return std::make_unique<optim::Adam>(std::move(p), adam_options(lr, b, eps, wd, ams));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0, py::arg("amsgrad") = false);
  py::class_<optim::AdamW, optim::Adam>(optim, "AdamW")
      .def(py::init([adam_options](std::vector<Tensor> p, double lr, std::pair<double, double> b, double eps, double wd,
                                   bool ams) {
             return std::make_unique<optim::AdamW>(std::move(p), adam_options(lr, b, eps, wd, ams));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 1e-2, py::arg("amsgrad") = false);

  // LR schedulers keep their optimizer alive (keep_alive) as PyTorch's reference it.
  using optim::LRScheduler;
  py::class_<LRScheduler, std::shared_ptr<LRScheduler>>(optim, "LRScheduler")
      .def("step", &LRScheduler::step)
      .def("get_last_lr", &LRScheduler::get_last_lr);
  py::class_<optim::StepLR, LRScheduler, std::shared_ptr<optim::StepLR>>(optim, "StepLR")
      .def(py::init<optim::Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("step_size"),
           py::arg("gamma") = 0.1, py::keep_alive<1, 2>());
  py::class_<optim::CosineAnnealingLR, LRScheduler, std::shared_ptr<optim::CosineAnnealingLR>>(optim,
                                                                                               "CosineAnnealingLR")
      .def(py::init<optim::Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("T_max"),
           py::arg("eta_min") = 0.0, py::keep_alive<1, 2>());
  py::class_<optim::LinearLR, LRScheduler, std::shared_ptr<optim::LinearLR>>(optim, "LinearLR")
      .def(py::init<optim::Optimizer&, double, double, int64_t>(), py::arg("optimizer"),
           py::arg("start_factor") = 1.0 / 3, py::arg("end_factor") = 1.0, py::arg("total_iters") = 5,
           py::keep_alive<1, 2>());
  py::class_<optim::LambdaLR, LRScheduler, std::shared_ptr<optim::LambdaLR>>(optim, "LambdaLR")
      .def(py::init<optim::Optimizer&, std::function<double(int64_t)>>(), py::arg("optimizer"), py::arg("lr_lambda"),
           py::keep_alive<1, 2>());
  py::class_<optim::SequentialLR, LRScheduler, std::shared_ptr<optim::SequentialLR>>(optim, "SequentialLR")
      .def(py::init<optim::Optimizer&, std::vector<std::shared_ptr<LRScheduler>>, std::vector<int64_t>>(),
           py::arg("optimizer"), py::arg("schedulers"), py::arg("milestones"), py::keep_alive<1, 2>());
}

}  // namespace python
}  // namespace trainrun
