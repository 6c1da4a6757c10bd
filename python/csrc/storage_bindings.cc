// Tensor storage and the memory around it: tensor.untyped_storage() (resize_
// frees or refills every view's memory), the CPU allocator's counters, the
// version counter's escape hatch, and the CRC-32C that checkpoints use.
#include <pybind11/pybind11.h>

#include "base/crc32c.h"
#include "python/csrc/bindings.h"
#include "tensor/allocator.h"

namespace trainrun {
namespace python {

void bind_storage(py::module_& m) {
  // tensor.untyped_storage(): the memory every view of a tensor shares.
  py::class_<Storage>(m, "UntypedStorage")
      .def("size", [](const Storage& s) { return s->nbytes(); })
      .def("nbytes", [](const Storage& s) { return s->nbytes(); })
      .def("data_ptr", [](const Storage& s) { return reinterpret_cast<uintptr_t>(s->data()); })
      .def_property_readonly("device", [](const Storage& s) { return s->device(); })
      .def(
          "resize_",
          [](Storage& s, size_t nbytes) {
            s->resize(nbytes);
            return s;
          },
          py::arg("size"), "New memory of `size` bytes for every tensor on this storage (0 frees it).")
      .def("__eq__", [](const Storage& a, const Storage& b) { return a.get() == b.get(); });
  m.def("_cpu_memory_allocated", [] { return cpu_memory_stats().allocated_bytes; });
  m.def("_cpu_max_memory_allocated", [] { return cpu_memory_stats().peak_allocated_bytes; });
  m.def("_cpu_reset_peak_memory_stats", &cpu_reset_peak_memory_stats);
  // torch.autograd._unsafe_preserve_version_counter's primitive: puts a version
  // back after a write that autograd must not count (a refilled FSDP buffer).
  m.def(
      "_crc32c",
      [](py::buffer data, uint32_t crc) {
        py::buffer_info info = data.request();
        const size_t n = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
        TR_CHECK(info.ndim <= 1 || PyBuffer_IsContiguous(info.view(), 'C'), ValueError,
                 "_crc32c: the buffer must be contiguous");
        py::gil_scoped_release nogil;
        return crc32c(info.ptr, n, crc);
      },
      py::arg("data"), py::arg("crc") = 0, "CRC-32C (Castagnoli) of a contiguous buffer: checkpoint checksums.");
  m.def("_unsafe_set_version", [](const Tensor& t, uint64_t v) { t.impl()->set_version(v); });
}

}  // namespace python
}  // namespace trainrun
