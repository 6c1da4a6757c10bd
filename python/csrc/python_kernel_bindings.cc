// Backend kernels written in Python for ops of the dispatcher (torch.library's
// Library("aten", "IMPL").impl("div", fn, "CPU")): while one is registered,
// the op passes the PythonKernel key (tensor/dispatch_key.h), whose boxed
// fallback calls it for inputs on its device and lets every other call go on
// to the op's own kernel. The Python side (trainrun/_library_schema.py) wraps
// the user's function: it is handed the op's arguments as a list and returns
// the op's result (a tensor, or a tuple for an op with several).
#include <map>
#include <mutex>

#include <pybind11/stl.h>  // (int[] and Tensor[] arguments as lists)

#include "python/csrc/bindings.h"
#include "tensor/dispatcher.h"

namespace trainrun {
namespace python {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::pair<std::string, DispatchKey>, std::shared_ptr<py::function>> kernels;
};

Registry& registry() {
  static Registry* r = new Registry();  // (never destroyed: ops may run while the interpreter shuts down)
  return *r;
}

std::shared_ptr<py::function> find_kernel(const std::string& op, DispatchKey backend) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.kernels.find({op, backend});
  return it == r.kernels.end() ? nullptr : it->second;
}

void push_result(Stack& stack, py::handle r, const std::string& op) {
  if (r.is_none()) {
    stack.emplace_back();
  } else if (py::isinstance<Tensor>(r)) {
    stack.emplace_back(r.cast<Tensor>());
  } else if (py::isinstance<py::bool_>(r)) {
    stack.emplace_back(r.cast<bool>());
  } else if (py::isinstance<py::int_>(r)) {
    stack.emplace_back(r.cast<int64_t>());
  } else if (py::isinstance<py::float_>(r)) {
    stack.emplace_back(r.cast<double>());
  } else {
    throw TypeError(fmt::format("the Python kernel of '{}' returned a {}; it must return tensors", op,
                                std::string(py::str(r.get_type().attr("__name__")))));
  }
}

// The PythonKernel key's fallback: the Python kernel of the op for the inputs' device, else the op's own.
void python_kernel_fallback(const OpTable& op, DispatchKey key, DispatchKeySet keys, Stack& stack) {
  DispatchKey backend = DispatchKey::CPU;
  for (int k = static_cast<int>(DispatchKey::LastBackend); k >= 0; --k)
    if (keys.has(static_cast<DispatchKey>(k))) {
      backend = static_cast<DispatchKey>(k);
      break;
    }
  std::shared_ptr<py::function> kernel = find_kernel(op.name(), backend);
  if (kernel == nullptr) {
    op.redispatch_boxed(key, keys, stack);
    return;
  }
  py::gil_scoped_acquire gil;
  py::list args;
  for (IValue& v : stack) args.append(ivalue_to_py(v));
  py::object result;
  {
    // The kernel's own calls of the op (its fallback to the original) reach the op's kernel, not itself.
    ExcludeDispatchKeyGuard below(DispatchKey::PythonKernel);
    result = (*kernel)(args);
  }
  stack.clear();
  if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
    for (py::handle r : result) push_result(stack, r, op.name());
  } else {
    push_result(stack, result, op.name());
  }
}

DispatchKey backend_named(const std::string& name) {
  if (name == "CPU" || name == "cpu") return DispatchKey::CPU;
  if (name == "CUDA" || name == "cuda") return DispatchKey::CUDA;
  if (name == "Meta" || name == "meta") return DispatchKey::Meta;
  throw ValueError(fmt::format("a Python kernel for a built-in op takes a device key (CPU, CUDA or Meta), not '{}'",
                               name));
}

}  // namespace

py::object ivalue_to_py(IValue& v) {
  const std::string type = v.type_name();
  if (type == "None") return py::none();
  if (type == "Tensor") return v.get<Tensor>().defined() ? py::cast(v.get<Tensor>()) : py::none();
  if (type == "Tensor[]") return py::cast(v.get<std::vector<Tensor>>());
  if (type == "int") return py::int_(v.get<int64_t>());
  if (type == "float") return py::float_(v.get<double>());
  if (type == "bool") return py::bool_(v.get<bool>());
  if (type == "int[]") return py::cast(v.get<IntList>());
  if (type == "str") return py::str(v.get<std::string>());
  if (type == "dtype") return py::cast(v.get<DType>());
  if (type == "Device") return py::cast(v.get<Device>());
  const Scalar& s = v.get<Scalar>();
  if (s.is_bool()) return py::bool_(s.to_int() != 0);
  if (s.is_integral()) return py::int_(s.to_int());
  return py::float_(s.to_double());
}

void bind_python_kernels(py::module_& m) {
  // Replaces op `name`'s kernel for device key `backend` with fn(args: list) -> result.
  m.def("_register_python_kernel", [](const std::string& name, const std::string& backend, py::function fn) {
    const OpTable* found = Dispatcher::get().find(name);
    TR_CHECK(found != nullptr, ValueError, "no op named '{}' in trainrun's dispatcher (trainrun._C._op_list() lists "
             "them)", name);
    TR_CHECK(found->boxable(), NotImplementedError, "op '{}' has a signature with no boxed form: its kernel cannot "
             "be written in Python", name);
    static std::once_flag installed;
    std::call_once(installed, [] {
      KeyFallback fallback;
      fallback.kind = KeyFallback::Boxed;
      fallback.kernel = &python_kernel_fallback;
      fallback.unboxable_falls_through = true;
      Dispatcher::get().set_fallback(DispatchKey::PythonKernel, std::move(fallback));
    });
    const DispatchKey key = backend_named(backend);
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      r.kernels[{name, key}] = hold_python_callable(std::move(fn));
    }
    const_cast<OpTable*>(found)->set_python_kernel(true);
  }, py::arg("name"), py::arg("backend"), py::arg("fn"));
  // Gives op `name` back its own kernel for `backend` (a Library going away).
  m.def("_remove_python_kernel", [](const std::string& name, const std::string& backend) {
    const DispatchKey key = backend_named(backend);
    std::shared_ptr<py::function> dropped;  // (released after the lock, with the GIL held)
    bool any_left = false;
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.kernels.find({name, key});
      if (it != r.kernels.end()) {
        dropped = std::move(it->second);
        r.kernels.erase(it);
      }
      for (const auto& [k, v] : r.kernels) any_left = any_left || k.first == name;
    }
    if (const OpTable* found = Dispatcher::get().find(name); found != nullptr && !any_left)
      const_cast<OpTable*>(found)->set_python_kernel(false);
  }, py::arg("name"), py::arg("backend"));
}

}  // namespace python
}  // namespace trainrun
