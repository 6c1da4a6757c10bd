// trainrun._C.device and the torch.cuda surface (trainrun._C._cuda):
// devices, streams, events, the caching allocator's statistics, pinned
// memory and the TF32 switch. Works on machines without a GPU: queries say
// so, and anything that needs one raises RuntimeError with the reason.
#include <pybind11/stl.h>

#include "python/csrc/bindings.h"
#include "tensor/cuda/blas_handle.h"
#include "tensor/cuda/cuda_allocator.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/pinned_memory.h"
#include "tensor/cuda/runtime.h"
#include "tensor/views.h"

namespace trainrun {
namespace python {

Device to_device(py::handle d) {
  if (d.is_none()) return Device();
  if (py::isinstance<Device>(d)) return d.cast<Device>();
  if (py::isinstance<py::str>(d)) return Device(d.cast<std::string>());
  if (py::isinstance<py::int_>(d)) return Device(DeviceType::CUDA, static_cast<int16_t>(d.cast<int>()));
  throw TypeError(fmt::format("expected a device ('cpu', 'cuda', 'cuda:N', an int or trainrun.device), got {}",
                              std::string(py::str(py::type::of(d)))));
}

namespace {

using release = py::call_guard<py::gil_scoped_release>;

int index_or_current(py::handle d) {
  if (d.is_none()) return cuda::current_device();
  return cuda::device_index(to_device(d).is_cuda() ? to_device(d) : Device(DeviceType::CUDA, -1));
}

py::dict stats_dict(const cuda::MemoryStats& s) {
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes;
  d["allocated_bytes.all.peak"] = s.peak_allocated_bytes;
  d["requested_bytes.all.current"] = s.requested_bytes;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.peak_reserved_bytes;
  d["active.all.current"] = s.active_blocks;
  d["inactive_split.all.current"] = s.cached_blocks;
  d["segment.all.current"] = s.segments;
  d["num_device_alloc"] = s.num_device_allocs;
  d["num_device_free"] = s.num_device_frees;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  return d;
}

Device with_index(Device d, int index) {
  if (index < 0) throw py::value_error(fmt::format("torch.device: device index must not be negative, got {}", index));
  d.index = static_cast<int16_t>(index);
  return d;
}

}  // namespace

void bind_cuda(py::module_& m) {
  py::class_<Device>(m, "device")
      .def(py::init([](const Device& d) { return d; }), py::arg("type"))
      .def(py::init([](const std::string& spec) { return Device(spec); }), py::arg("type"))
      // An int alone is an accelerator index, as PyTorch reads torch.device(1): cuda:1.
      .def(py::init([](int index) { return with_index(Device(DeviceType::CUDA), index); }), py::arg("type"))
      .def(py::init([](const std::string& type, int index) {
             if (type.find(':') != std::string::npos)
               throw py::value_error(fmt::format(
                   "torch.device: type (string) must not include an index because index was passed "
                   "explicitly: {}", type));
             return with_index(Device(type), index);
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", &Device::type_name)
      .def_property_readonly("index", [](const Device& d) -> py::object {
        if (d.index < 0) return py::none();
        return py::int_(d.index);
      })
      .def("__str__", &Device::str)
      .def("__repr__",
           [](const Device& d) {
             return d.index < 0 ? fmt::format("device(type='{}')", d.type_name())
                                : fmt::format("device(type='{}', index={})", d.type_name(), d.index);
           })
      .def("__eq__", [](const Device& a, py::handle b) { return !b.is_none() && a == to_device(b); })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 65536 + d.index; });

  // trainrun.set_default_device / get_default_device and `with trainrun.device(...)` (this thread's).
  m.def("_set_default_device", [](py::handle d) { set_default_device(to_device(d)); });
  m.def("_get_default_device", &default_device);

  auto c = m.def_submodule("_cuda", "torch.cuda's functions over tensor/cuda");
  c.def("is_available", &cuda::is_available);
  c.def("device_count", &cuda::device_count);
  c.def("unavailable_reason", &cuda::unavailable_reason);
  c.def("compiled_version", &cuda::compiled_version);
  c.def("current_device", &cuda::current_device);
  c.def("set_device", [](py::handle d) { cuda::set_device(index_or_current(d)); });
  c.def(
      "synchronize", [](py::handle d) { cuda::synchronize(d.is_none() ? -1 : index_or_current(d)); },
      py::arg("device") = py::none(), release());
  c.def("get_device_name", [](py::handle d) { return cuda::device_name(index_or_current(d)); },
        py::arg("device") = py::none());
  c.def("set_allow_tf32", &cuda::set_allow_tf32);
  c.def("allow_tf32", &cuda::allow_tf32);

  py::class_<cuda::Stream>(c, "Stream")
      .def_property_readonly("device", [](const cuda::Stream& s) { return Device(DeviceType::CUDA, s.device()); })
      .def_property_readonly("cuda_stream", [](const cuda::Stream& s) { return reinterpret_cast<uintptr_t>(s.handle()); })
      .def("query", &cuda::Stream::query)
      .def("synchronize", &cuda::Stream::synchronize, release())
      .def("wait_event", [](const cuda::Stream& s, const cuda::Event& e) { e.block(s); })
      .def("wait_stream",
           [](const cuda::Stream& s, const cuda::Stream& other) {
             cuda::Event e;
             e.record(other);
             e.block(s);
           })
      .def("__eq__", [](const cuda::Stream& a, const cuda::Stream& b) { return a == b; })
      .def("__repr__", [](const cuda::Stream& s) {
        return fmt::format("<trainrun.cuda.Stream device=cuda:{} cuda_stream={:#x}>", s.device(),
                           reinterpret_cast<uintptr_t>(s.handle()));
      });
  c.def("stream_from_pool", [](py::handle d, bool high) { return cuda::stream_from_pool(index_or_current(d), high); },
        py::arg("device") = py::none(), py::arg("high_priority") = false);
  c.def("current_stream", [](py::handle d) { return cuda::current_stream(index_or_current(d)); },
        py::arg("device") = py::none());
  c.def("default_stream", [](py::handle d) { return cuda::default_stream(index_or_current(d)); },
        py::arg("device") = py::none());
  c.def("set_stream", [](const cuda::Stream& s) {
    cuda::set_device(s.device());
    cuda::set_current_stream(s);
  });

  py::class_<cuda::Event>(c, "Event")
      .def(py::init<bool, bool>(), py::arg("enable_timing") = false, py::arg("blocking") = false)
      .def(
          "record",
          [](cuda::Event& e, std::optional<cuda::Stream> s) { s ? e.record(*s) : e.record(); },
          py::arg("stream") = py::none())
      .def(
          "wait", [](const cuda::Event& e, std::optional<cuda::Stream> s) { e.block(s ? *s : cuda::current_stream()); },
          py::arg("stream") = py::none())
      .def("query", &cuda::Event::query)
      .def("synchronize", &cuda::Event::synchronize, release())
      .def("elapsed_time", &cuda::Event::elapsed_time);

  c.def("memory_stats", [](py::handle d) { return stats_dict(cuda::memory_stats(index_or_current(d))); },
        py::arg("device") = py::none());
  c.def("memory_allocated", [](py::handle d) { return cuda::memory_stats(index_or_current(d)).allocated_bytes; },
        py::arg("device") = py::none());
  c.def("max_memory_allocated",
        [](py::handle d) { return cuda::memory_stats(index_or_current(d)).peak_allocated_bytes; },
        py::arg("device") = py::none());
  c.def("memory_reserved", [](py::handle d) { return cuda::memory_stats(index_or_current(d)).reserved_bytes; },
        py::arg("device") = py::none());
  c.def("max_memory_reserved",
        [](py::handle d) { return cuda::memory_stats(index_or_current(d)).peak_reserved_bytes; },
        py::arg("device") = py::none());
  c.def("reset_peak_memory_stats", [](py::handle d) { cuda::reset_peak_memory_stats(index_or_current(d)); },
        py::arg("device") = py::none());
  c.def("empty_cache", []() {
    cuda::empty_cache();
    if (cuda::is_available()) cuda::empty_pinned_cache();
  });
  c.def("pin_memory", &cuda::pin_memory, release());
  c.def("is_pinned", &cuda::is_pinned);
  c.def("record_stream", &cuda::record_stream);
  c.def(
      "to",
      [](const Tensor& t, py::handle device, py::object dtype, bool non_blocking, bool copy) {
        std::optional<DType> dt;
        if (!dtype.is_none()) dt = dtype.cast<DType>();
        Device d = device.is_none() ? t.device() : to_device(device);
        py::gil_scoped_release nogil;
        return to(t, d, dt, non_blocking, copy);
      },
      py::arg("tensor"), py::arg("device"), py::arg("dtype") = py::none(), py::arg("non_blocking") = false,
      py::arg("copy") = false);
  c.def(
      "copy_",
      [](py::object dst, const Tensor& src, bool non_blocking) {
        Tensor& t = dst.cast<Tensor&>();
        {
          py::gil_scoped_release unlocked;
          copy_(t, src, non_blocking);
        }
        return dst;  // (the caller's object, as PyTorch's copy_)
      },
      py::arg("dst"), py::arg("src"), py::arg("non_blocking") = false);
}

}  // namespace python
}  // namespace trainrun
