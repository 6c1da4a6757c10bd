// Tensor, dtypes, factories and the tensor core's ops. Everything that can
// take time runs with the GIL released. NumPy arrays are shared, not copied,
// both ways.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "autograd/variable.h"
#include "autograd/grad_mode.h"
#include "compile/graph_capture.h"
#include "python/csrc/bindings.h"
#include "python/csrc/op_arguments.h"
#include "tensor/dlpack.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"
#include "tensor/print.h"

namespace trainrun {
namespace python {
namespace {

using release = py::call_guard<py::gil_scoped_release>;

const char* numpy_format(DType d) {
  switch (d) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Float16:
      return "float16";
    case DType::Int64:
      return "int64";
    case DType::Int32:
      return "int32";
    case DType::Int16:
      return "int16";
    case DType::Int8:
      return "int8";
    case DType::UInt8:
      return "uint8";
    case DType::Bool:
      return "bool";
    default:
      break;
  }
  throw TypeError(fmt::format("{} has no NumPy dtype; convert it first, e.g. t.to(trainrun.float32)", dtype_name(d)));
}

DType dtype_of_numpy(const py::dtype& d) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 4) return DType::Float32;
  if (kind == 'f' && size == 8) return DType::Float64;
  if (kind == 'f' && size == 2) return DType::Float16;
  if (kind == 'i' && size == 8) return DType::Int64;
  if (kind == 'i' && size == 4) return DType::Int32;
  if (kind == 'i' && size == 2) return DType::Int16;
  if (kind == 'i' && size == 1) return DType::Int8;
  if (kind == 'u' && size == 1) return DType::UInt8;
  if (kind == 'b') return DType::Bool;
  throw TypeError(fmt::format("NumPy dtype {} is not supported (float16/32/64, int8/16/32/64, uint8, bool)",
                              std::string(py::str(static_cast<const py::handle&>(d)))));
}

// The tensor's memory as an ndarray; the array keeps the tensor alive.
py::array to_numpy(const Tensor& given, bool force) {
  compile::GraphCapture::note_graph_break("numpy() read a tensor's values into Python: what follows may depend on them");
  // force=True: detached and copied to the CPU first, as PyTorch's (the array then shares no memory with a
  // tensor off the CPU).
  const Tensor t = force && !given.device().is_meta() ? detach(given).to(Device(DeviceType::CPU)) : given;
  TR_CHECK(!t.device().is_meta(), TypeError, "numpy(): a meta tensor has no data to convert");
  TR_CHECK(t.device().is_cpu(), TypeError, "numpy(): the tensor is on {}; copy it to the CPU first", t.device().str());
  // As PyTorch: refused only while gradients are being recorded (a custom op's kernel, under no_grad, may).
  TR_CHECK(
      !(requires_grad(t) && GradMode::is_enabled()), ValueError,
      "numpy(): the tensor requires grad; call detach() first (as in PyTorch) so the array cannot bypass autograd");
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(s * t.element_size());
  auto* keep = new Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(py::dtype(numpy_format(t.dtype())), shape, strides, t.data_ptr(), owner);
}

// An ndarray's memory as a tensor, shared: writes show on both sides.
Tensor from_numpy(py::array a) {
  const DType dt = dtype_of_numpy(a.dtype());
  IntList sizes, strides;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    sizes.push_back(a.shape(i));
    TR_CHECK(a.strides(i) % a.itemsize() == 0 && a.strides(i) >= 0, ValueError,
             "from_numpy: strides {} are negative or not a multiple of the item size (copy the array first)",
             a.strides(i));
    strides.push_back(a.strides(i) / a.itemsize());
  }
  TR_CHECK(a.writeable(), ValueError, "from_numpy: the array is read-only (copy it first)");
  auto* keep = new py::object(a);
  return from_blob(a.mutable_data(), sizes, strides, dt, [keep](void*) {
    py::gil_scoped_acquire gil;  // the last view may die on any thread
    delete keep;
  });
}

py::object item_of(const Tensor& t) {
  compile::GraphCapture::note_graph_break("item() read a tensor's value into Python: what follows may depend on it");
  TR_CHECK(t.numel() == 1, ValueError, "item(): the tensor has {} elements, not one", t.numel());
  Scalar s = t.item();
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return py::bool_(s.to<bool>());
    case Scalar::Kind::Int:
      return py::int_(s.to<int64_t>());
    case Scalar::Kind::Float:
      return py::float_(s.to<double>());
  }
  return py::none();
}

std::optional<DType> opt_dtype(py::object d) {
  if (d.is_none()) return std::nullopt;
  return d.cast<DType>();
}

TensorOptions options(py::object dtype, py::object device = py::none()) {
  TensorOptions o;
  o.dtype = opt_dtype(dtype);
  o.device = device.is_none() ? default_device() : to_device(device);  // trainrun.set_default_device's
  return o;
}

// DLPack capsules, as the Python array API defines them: named "dltensor"
// until a consumer takes ownership and renames it "used_dltensor".
py::capsule to_dlpack_capsule(const Tensor& t) {
  DLManagedTensor* managed = to_dlpack(t);
  return py::capsule(managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {  // never consumed: we still own it
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      if (m != nullptr && m->deleter != nullptr) m->deleter(m);
    }
  });
}

Tensor from_dlpack_object(py::object obj) {
  py::object capsule = py::hasattr(obj, "__dlpack__") ? obj.attr("__dlpack__")() : obj;
  TR_CHECK(PyCapsule_IsValid(capsule.ptr(), "dltensor"), TypeError,
           "from_dlpack: expected an object with __dlpack__ or an unused 'dltensor' capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  Tensor t = from_dlpack(managed);  // the tensor now owns the producer's memory
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  return t;
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::enum_<DType> dtypes(m, "dtype");
  for (DType d : {DType::Bool, DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::Float16,
                  DType::BFloat16, DType::Float32, DType::Float64})
    dtypes.value(dtype_name(d), d);
  // (The package sets repr and str to "trainrun.float32".)
  dtypes.def_property_readonly("is_floating_point", [](DType d) { return is_floating(d); })
      .def_property_readonly("is_signed", [](DType d) { return is_signed(d); })
      .def_property_readonly("is_complex", [](DType) { return false; })  // (complex dtypes are Python's: _complex.py)
      .def_property_readonly("itemsize", [](DType d) { return element_size(d); });

  py::class_<Tensor> tensor_class(m, "Tensor", py::dynamic_attr(), py::metaclass(tensor_metaclass()));
  note_tensor_type(m, tensor_class);
  tensor_class
      // Tensor(t): another handle on t's data (what nn.Parameter builds on).
      .def(py::init([](const Tensor& t) { return Tensor(t); }))
      // torch.Tensor(2, 3), torch.Tensor([1, 2]), torch.Tensor(): PyTorch's legacy constructor, a CPU tensor of the
      // default dtype (_legacy_tensor_types.py, as torch.FloatTensor(...) and the other legacy types).
      .def(py::init([](py::args args, py::kwargs kwargs) {
        static auto* make = new py::object(py::module_::import("trainrun._legacy_tensor_types").attr("make_default"));
        return (*make)(*args, **kwargs).cast<Tensor>();
      }))
      // (The operators, + * < & and the rest, are direct CPython methods: tensor_operators.cc.)
      // (A running capture hears of shape reads: a shape that depends on the data must not be baked in.)
      .def_property_readonly("shape", [](const Tensor& t) {
        compile::GraphCapture::note_shape_read(t);
        return py::tuple(py::cast(t.sizes()));
      })
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> d) -> py::object {
            compile::GraphCapture::note_shape_read(t);
            if (d) return py::int_(t.size(*d));
            return py::tuple(py::cast(t.sizes()));
          },
          py::arg("dim") = py::none())
      .def(
          "stride",
          [](const Tensor& t, std::optional<int64_t> d) -> py::object {
            if (d) return py::int_(t.stride(*d));  // (negative dims count from the end, as size's)
            return py::tuple(py::cast(t.strides()));
          },
          py::arg("dim") = py::none())
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("is_cuda", &Tensor::is_cuda)
      .def_property_readonly("is_meta", [](const Tensor& t) { return t.device().is_meta(); })
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", [](const Tensor& t) {
        compile::GraphCapture::note_shape_read(t);
        return t.numel();
      })
      .def("element_size", &Tensor::element_size)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_floating_point", &Tensor::is_floating_point)
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr",  // 0 for a meta tensor, as in PyTorch
           [](const Tensor& t) { return t.device().is_meta() ? 0 : reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("untyped_storage", [](const Tensor& t) { return t.impl()->storage(); })
      .def_property_readonly("_version", [](const Tensor& t) { return t.impl()->version(); })
      // The TensorImpl's address: the same for every handle of one tensor
      // (deepcopy's memo keeps tied weights tied by it).
      .def_property_readonly("_cdata", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); })
      // The in-place view ops (unsqueeze_, t_, ...): this tensor takes a view's geometry over the same storage.
      .def("_set_geometry",
           [](Tensor& t, const IntList& sizes, const IntList& strides, int64_t offset) {
             TR_CHECK(sizes.size() == strides.size(), ValueError, "_set_geometry: {} sizes but {} strides",
                      sizes.size(), strides.size());
             t.impl()->set_geometry(sizes, strides, offset);
             t.impl()->bump_version();
           })
      // PyTorch's Tensor.set_(source): this tensor becomes another handle on source's storage, sizes and
      // strides (what an out= argument too small to hold a result is given: trainrun does not grow a storage).
      .def(
          "set_",
          [](py::object self_obj, const Tensor& source) {
            Tensor& self = self_obj.cast<Tensor&>();
            TR_CHECK(self.dtype() == source.dtype(), TypeError, "set_(): the source is {}, this tensor {}",
                     dtype_name(source.dtype()), dtype_name(self.dtype()));
            TR_CHECK(self.device() == source.device(), ValueError, "set_(): the source is on {}, this tensor on {}",
                     source.device().str(), self.device().str());
            TR_CHECK(!(requires_grad(self) && GradMode::is_enabled()), ValueError,
                     "set_(): a tensor that requires grad cannot take another storage while grad is recorded");
            self.impl()->set_storage(source.impl()->storage());
            self.impl()->set_geometry(source.sizes(), source.strides(), source.storage_offset());
            self.impl()->bump_version();
            return self_obj;
          },
          py::arg("source"))
      .def("item", &item_of)
      .def(
          "__repr__",
          [](const Tensor& t, const std::vector<std::string>& suffixes) {
            // The core prints PyTorch's spelling ("dtype=torch.float64"); from Python, name the package the
            // dtype comes from. suffixes: the autograd ones Python adds (trainrun/_tensor.py's _repr).
            std::string s = tensor_repr(t, suffixes);
            for (size_t at = s.find("dtype=torch."); at != std::string::npos; at = s.find("dtype=torch.", at + 15))
              s.replace(at + 6, 6, "trainrun.");
            return s;
          },
          py::arg("suffixes") = std::vector<std::string>{})
      .def("numpy", &to_numpy, py::kw_only(), py::arg("force") = false)
      .def(
          "__dlpack__", [](const Tensor& t, py::object stream) { return to_dlpack_capsule(t); },
          py::arg("stream") = py::none())
      .def("__dlpack_device__",
           [](const Tensor& t) {
             return py::make_tuple(t.device().is_cpu() ? 1 : 2, t.device().is_cpu() ? 0 : t.device().index);
           })
      .def("__len__",
           [](const Tensor& t) {
             TR_CHECK(t.dim() > 0, TypeError, "len() of a 0-d tensor");
             compile::GraphCapture::note_shape_read(t);
             return t.size(0);
           })
      // Views and copies.
      .def("view", [](const Tensor& t, const IntList& s) { return view(t, s); })
      .def("reshape", [](const Tensor& t, const IntList& s) { return reshape(t, s); })
      .def("permute", [](const Tensor& t, const IntList& d) { return permute(t, d); })
      .def("transpose", [](const Tensor& t, int64_t a, int64_t b) { return transpose(t, a, b); })
      .def("t", [](const Tensor& x) { return t(x); })
      .def("slice", [](const Tensor& t, int64_t d, std::optional<int64_t> s, std::optional<int64_t> e,
                       int64_t st) { return slice(t, d, s, e, st); })
      .def("narrow", [](const Tensor& t, int64_t d, int64_t s, int64_t n) { return narrow(t, d, s, n); })
      .def(
          "squeeze", [](const Tensor& t, std::optional<int64_t> d) { return d ? squeeze(t, *d) : squeeze(t); },
          py::arg("dim") = py::none())
      .def("expand", [](const Tensor& t, const IntList& s) { return expand(t, s); })
      .def(
          "flatten", [](const Tensor& t, int64_t a, int64_t b) { return flatten(t, a, b); }, py::arg("start_dim") = 0,
          py::arg("end_dim") = -1)
      .def(
          "contiguous", [](const Tensor& t) { return contiguous(t); }, release())
      .def(
          "clone", [](const Tensor& t) { return clone(t); }, release())
      .def(
          "to", [](const Tensor& t, DType d) { return to(t, d); }, release())
      .def("detach", [](const Tensor& t) { return detach(t); })
      // PyTorch's detach_(): this tensor leaves its graph (no grad_fn, no longer requiring grad).
      .def("detach_",
           [](py::object self_obj) {
             Tensor& self = self_obj.cast<Tensor&>();
             self.impl()->set_autograd_meta(nullptr);
             return self_obj;
           })
      // In-place methods hand back the caller's own object (x.copy_(y) is x), as
      // PyTorch's: a Parameter stays that Parameter through w.mul_(2), and the
      // Python in-place methods that end in copy_ inherit it.
      .def("copy_",
           [](py::object self, const Tensor& s) {
             Tensor& t = self.cast<Tensor&>();
             {
               py::gil_scoped_release unlocked;
               copy_(t, s);
             }
             return self;
           })
      .def("fill_",
           [](py::object self, py::object v) {
             fill_(self.cast<Tensor&>(), to_scalar(v));
             return self;
           })
      .def("zero_", [](py::object self) {
        Tensor& t = self.cast<Tensor&>();
        {
          py::gil_scoped_release unlocked;
          zero_(t);
        }
        return self;
      });

  m.def("from_numpy", &from_numpy, "A tensor sharing the array's memory");
  m.def("from_dlpack", &from_dlpack_object, "A tensor sharing the memory of any DLPack producer (NumPy, PyTorch)");
  // Checkpoints as safetensors: loading one cannot run code (no pickle).
  m.def(
      "save",
      [](const std::map<std::string, Tensor>& tensors, const std::string& path) { save_safetensors(tensors, path); },
      py::arg("state_dict"), py::arg("path"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "load", [](const std::string& path) { return load_safetensors(path); }, py::arg("path"),
      py::call_guard<py::gil_scoped_release>());
  m.def("manual_seed", [](uint64_t s) { manual_seed(s); });
  // A random generator (tensor/generator.h): trainrun.Generator holds one; _default_generator() is the one
  // trainrun.manual_seed seeds. get_state/set_state: the CPU engine in PyTorch's layout (5056 bytes);
  // philox_state: the (seed, offset) of CUDA draws.
  py::class_<Generator, std::shared_ptr<Generator>>(m, "_Generator")
      .def(py::init<>())
      .def("manual_seed", [](Generator& g, uint64_t seed) { g.manual_seed(seed); }, py::arg("seed"))
      .def("initial_seed", [](Generator& g) {
        std::lock_guard<std::mutex> lock(g.mutex());
        return g.cpu_engine().initial_seed();
      })
      .def("get_state", [](Generator& g) {
        std::vector<uint8_t> bytes;
        {
          std::lock_guard<std::mutex> lock(g.mutex());
          bytes = g.cpu_engine().serialize();
        }
        return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      })
      .def("set_state", [](Generator& g, const py::bytes& state) {
        const std::string bytes = state;
        std::lock_guard<std::mutex> lock(g.mutex());
        g.cpu_engine().deserialize(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      }, py::arg("state"))
      .def("random32", [](Generator& g, int64_t count) {
        std::vector<uint32_t> out(static_cast<size_t>(std::max<int64_t>(count, 0)));
        std::lock_guard<std::mutex> lock(g.mutex());
        for (uint32_t& x : out) x = g.cpu_engine().random();
        return out;
      }, py::arg("count"), "The engine's next `count` 32-bit outputs.")
      .def("random64", [](Generator& g) {
        std::lock_guard<std::mutex> lock(g.mutex());
        return g.cpu_engine().random64();
      }, "Two outputs, the first as the high half (PyTorch's 64-bit draw).")
      .def("philox_state", [](Generator& g) { return py::make_tuple(g.seed(), g.offset()); })
      .def("set_philox_state", [](Generator& g, uint64_t seed, uint64_t offset) {
        g.restore(Generator::Snapshot{seed, offset, g.snapshot().cpu_engine});  // (the CPU engine as it is)
      }, py::arg("seed"), py::arg("offset"));
  m.def("_default_generator", [] { return std::shared_ptr<Generator>(&default_generator(), [](Generator*) {}); });
  m.def("set_num_threads", &set_num_threads, py::arg("num"),
        "Threads for intra-op parallelism (kernels and OpenBLAS), process-wide.");
  m.def("get_num_threads", &get_num_threads);
  // trainrun.autocast's switch: this thread's state for a device type ("cpu" or "cuda").
  m.def(
      "_set_autocast",
      [](const std::string& device_type, bool enabled, DType dtype) {
        set_autocast_state(to_device(py::str(device_type)).type, AutocastState{enabled, dtype});
      },
      py::arg("device_type"), py::arg("enabled"), py::arg("dtype"));
  m.def(
      "_get_autocast",
      [](const std::string& device_type) {
        const AutocastState s = autocast_state(to_device(py::str(device_type)).type);
        return py::make_tuple(s.enabled, s.dtype);
      },
      py::arg("device_type"));
  m.def(
      "zeros", [](const IntList& s, py::object d, py::object dev) { return zeros(s, options(d, dev)); },
      py::arg("size"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "ones", [](const IntList& s, py::object d, py::object dev) { return ones(s, options(d, dev)); },
      py::arg("size"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "empty", [](const IntList& s, py::object d, py::object dev) { return empty(s, options(d, dev)); },
      py::arg("size"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "full",
      [](const IntList& s, py::object v, py::object d, py::object dev) { return full(s, to_scalar(v), options(d, dev)); },
      py::arg("size"), py::arg("fill_value"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "eye",
      [](int64_t n, std::optional<int64_t> m_cols, py::object d, py::object dev) {
        return eye(n, m_cols.value_or(-1), options(d, dev));
      },
      py::arg("n"), py::arg("m") = py::none(), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "linspace",
      [](double start, double end, int64_t steps, py::object d, py::object dev) {
        return linspace(start, end, steps, options(d, dev));
      },
      py::arg("start"), py::arg("end"), py::arg("steps"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "dot", [](const Tensor& a, const Tensor& b) { return dot(a, b); }, py::arg("input"), py::arg("other"),
      release());
  m.def(
      "outer", [](const Tensor& a, const Tensor& b) { return outer(a, b); }, py::arg("input"), py::arg("vec2"),
      release());
  m.def(
      "rand",
      [](const IntList& s, py::object d, py::object dev) {
        TensorOptions o = options(d, dev);
        py::gil_scoped_release nogil;
        return rand(s, o);
      },
      py::arg("size"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "randn",
      [](const IntList& s, py::object d, py::object dev) {
        TensorOptions o = options(d, dev);
        py::gil_scoped_release nogil;
        return randn(s, o);
      },
      py::arg("size"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "randint",
      [](int64_t lo, int64_t hi, const IntList& s, py::object d, py::object dev) {
        TensorOptions o = options(d, dev);
        if (!o.dtype) o.dtype = DType::Int64;
        py::gil_scoped_release nogil;
        return randint(lo, hi, s, o);
      },
      py::arg("low"), py::arg("high"), py::arg("size"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def(
      "arange",
      [](py::object start, py::object end, py::object step, py::object d, py::object dev) {
        if (end.is_none()) return arange(to_scalar(start), options(d, dev));
        return arange(to_scalar(start), to_scalar(end), to_scalar(step), options(d, dev));
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::arg("dtype") = py::none(),
      py::arg("device") = py::none());

  // Elementwise (the list's pointwise ops are generated: op_bindings_generated.cc).
  // div: the list's div and div.rounding share the name; rounding_mode picks one.
  m.def(
      "div",
      [](py::handle input, py::handle other_, py::handle rounding_mode, py::handle out_) -> py::object {
        Tensor& self = tensor_arg(input, "div", "input", 1);
        Tensor other = operand_arg(other_, "div", "other", 2);
        std::optional<std::string> mode;
        if (!rounding_mode.is_none()) mode = string_arg(rounding_mode, "div", "rounding_mode", 0);
        Tensor out = out_.is_none() ? Tensor() : tensor_arg(out_, "div", "out", 0);
        Tensor result;
        {
          MaybeReleaseGil nogil;
          release_if_large(nogil, self);
          const DispatchKeySet keys = out.defined() ? keys_of(self, other, out) : keys_of(self, other);
          result = mode ? ops::div_rounding::call(keys, self, other, *mode, out) : ops::div::call(keys, self, other, out);
        }
        if (!out.defined()) return py::cast(std::move(result));
        out.impl()->bump_version();
        return py::reinterpret_borrow<py::object>(out_);
      },
      py::arg("input"), py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none(),
      py::arg("out") = py::none());
  m.def(
      "where", [](const Tensor& c, const Tensor& a, const Tensor& b) { return where(c, a, b); }, release());

  // Products, reductions, indexing, nn functions.
  m.def(
      "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, release());
  m.def(
      "sum", [](const Tensor& x, const IntList& d, bool k) { return sum(x, d, k); }, py::arg("input"),
      py::arg("dim") = IntList{}, py::arg("keepdim") = false, release());
  m.def(
      "mean", [](const Tensor& x, const IntList& d, bool k) { return mean(x, d, k); }, py::arg("input"),
      py::arg("dim") = IntList{}, py::arg("keepdim") = false, release());
  m.def(
      "var", [](const Tensor& x, const IntList& d, int64_t c, bool k) { return var(x, d, c, k); }, py::arg("input"),
      py::arg("dim") = IntList{}, py::arg("correction") = 1, py::arg("keepdim") = false, release());
  m.def(
      "cat", [](const std::vector<Tensor>& ts, int64_t d) { return cat(ts, d); }, py::arg("tensors"),
      py::arg("dim") = 0, release());
  m.def(
      "stack", [](const std::vector<Tensor>& ts, int64_t d) { return stack(ts, d); }, py::arg("tensors"),
      py::arg("dim") = 0, release());
  m.def("masked_fill",
        [](const Tensor& x, const Tensor& mask, py::object v) { return masked_fill(x, mask, to_scalar(v)); });
  m.def(
      "scatter", [](const Tensor& x, int64_t d, const Tensor& i, const Tensor& src) { return scatter(x, d, i, src); },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"), release());
  m.def(
      "sort", [](const Tensor& x, int64_t d, bool desc) { return sort(x, d, desc); }, py::arg("input"),
      py::arg("dim") = -1, py::arg("descending") = false, release());
  m.def(
      "topk",
      [](const Tensor& x, int64_t k, int64_t d, bool largest, bool sorted) { return topk(x, k, d, largest, sorted); },
      py::arg("input"), py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true,
      release());
  // max/min along a dim: (values, indices); Python wraps them in named tuples.
  m.def(
      "max_dim", [](const Tensor& x, int64_t d, bool k) { return trainrun::max(x, d, k); }, py::arg("input"),
      py::arg("dim"), py::arg("keepdim") = false, release());
  m.def(
      "min_dim", [](const Tensor& x, int64_t d, bool k) { return trainrun::min(x, d, k); }, py::arg("input"),
      py::arg("dim"), py::arg("keepdim") = false, release());
  m.def(
      "std", [](const Tensor& x, const IntList& d, int64_t c, bool k) { return trainrun::std(x, d, c, k); },
      py::arg("input"), py::arg("dim") = IntList{}, py::arg("correction") = 1, py::arg("keepdim") = false, release());
  m.def(
      "norm", [](const Tensor& x, double p, const IntList& d, bool k) { return norm(x, p, d, k); }, py::arg("input"),
      py::arg("p") = 2.0, py::arg("dim") = IntList{}, py::arg("keepdim") = false, release());
  m.def(
      "prod", [](const Tensor& x, const IntList& d, bool k) { return prod(x, d, k); }, py::arg("input"),
      py::arg("dim") = IntList{}, py::arg("keepdim") = false, release());
  m.def(
      "bmm", [](const Tensor& a, const Tensor& b) { return bmm(a, b); }, release());
  m.def(
      "chunk", [](const Tensor& x, int64_t n, int64_t d) { return chunk(x, n, d); }, py::arg("input"),
      py::arg("chunks"), py::arg("dim") = 0);
  m.def(
      "split", [](const Tensor& x, int64_t n, int64_t d) { return split(x, n, d); }, py::arg("tensor"),
      py::arg("split_size"), py::arg("dim") = 0);
  m.def(
      "one_hot", [](const Tensor& x, int64_t n) { return one_hot(x, n); }, py::arg("input"),
      py::arg("num_classes") = -1);
  m.def(
      "embedding", [](const Tensor& i, const Tensor& w) { return embedding(w, i); }, release());
  m.def(
      "layer_norm",
      [](const Tensor& x, const IntList& shape, const Tensor& w, const Tensor& b, double eps) {
        return std::get<0>(layer_norm(x, shape, w, b, eps));
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = Tensor(), py::arg("bias") = Tensor(),
      py::arg("eps") = 1e-5, release());
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, const Tensor& b, const IntList& s, const IntList& p, const IntList& d,
         int64_t g) { return conv2d(x, w, b, s, p, d, g); },
      py::arg("input"), py::arg("weight"), py::arg("bias") = Tensor(), py::arg("stride") = IntList{1},
      py::arg("padding") = IntList{0}, py::arg("dilation") = IntList{1}, py::arg("groups") = 1, release());
  m.def(
      "max_pool2d",
      [](const Tensor& x, const IntList& k, const IntList& s, const IntList& p, const IntList& d, bool ceil_mode,
         bool return_indices) -> py::object {
        std::tuple<Tensor, Tensor> r;
        {
          py::gil_scoped_release nogil;
          r = max_pool2d(x, k, s, p, d, ceil_mode);
        }
        if (return_indices) return py::make_tuple(std::get<0>(r), std::get<1>(r));
        return py::cast(std::get<0>(r));
      },
      py::arg("input"), py::arg("kernel_size"), py::arg("stride") = IntList{}, py::arg("padding") = IntList{0},
      py::arg("dilation") = IntList{1}, py::arg("ceil_mode") = false, py::arg("return_indices") = false);
  m.def(
      "avg_pool2d",
      [](const Tensor& x, const IntList& k, const IntList& s, const IntList& p, bool ceil_mode, bool count_include_pad) {
        return avg_pool2d(x, k, s, p, ceil_mode, count_include_pad);
      },
      py::arg("input"), py::arg("kernel_size"), py::arg("stride") = IntList{}, py::arg("padding") = IntList{0},
      py::arg("ceil_mode") = false, py::arg("count_include_pad") = true, release());
  m.def(
      "dropout", [](const Tensor& x, double p, bool train) { return std::get<0>(dropout(x, p, train)); },
      py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true, release());
  m.def(
      "softmax",
      [](const Tensor& x, int64_t d, std::optional<DType> dtype) { return softmax(dtype ? x.to(*dtype) : x, d); },
      py::arg("input"), py::arg("dim"), py::arg("dtype") = py::none(), release());
  m.def(
      "log_softmax",
      [](const Tensor& x, int64_t d, std::optional<DType> dtype) { return log_softmax(dtype ? x.to(*dtype) : x, d); },
      py::arg("input"), py::arg("dim"), py::arg("dtype") = py::none(), release());
  m.def(
      "cross_entropy", [](const Tensor& x, const Tensor& y) { return cross_entropy(x, y); }, release());
}

}  // namespace python
}  // namespace trainrun
