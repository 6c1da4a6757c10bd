// Tensor storage and the memory around it: tensor.untyped_storage() (resize_
// frees or refills every view's memory), the CPU allocator's counters, the
// version counter's escape hatch, the CRC-32C that checkpoints use, and
// shared memory (share_memory_(), the handles trainrun.multiprocessing sends).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "base/crc32c.h"
#include "python/csrc/bindings.h"
#include "tensor/allocator.h"
#include "tensor/shared_memory.h"

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
      .def("__eq__", [](const Storage& a, const Storage& b) { return a.get() == b.get(); })
      .def("is_shared", [](const Storage& s) { return s->shared_segment() != nullptr || s->device().is_cuda(); })
      .def(
          "share_memory_",
          [](Storage& s) {
            if (s->device().is_cpu()) share_storage(*s);
            return s;
          },
          "Moves the bytes into shared memory in place (CUDA storages: no-op, as in PyTorch).")
      .def(
          "_shared_handle",
          [](const Storage& s) {
            const auto& segment = s->shared_segment();
            TR_CHECK(segment != nullptr, ValueError, "_shared_handle: the storage is not in shared memory");
            return py::make_tuple(segment->fd(), segment->inode(), s->shared_offset(), s->nbytes());
          },
          "(segment fd in this process, segment inode, offset, nbytes): what is sent to share this storage.");
  m.def(
      "_storage_from_shared_fd",
      [](int fd, size_t offset, size_t nbytes) { return storage_from_shared_fd(fd, offset, nbytes); }, py::arg("fd"),
      py::arg("offset"), py::arg("nbytes"),
      "A storage on a block of a received segment; maps the segment once per process (fd is not taken).");
  m.def(
      "_tensor_on_storage",
      [](const Storage& s, DType dtype, const IntList& sizes, const IntList& strides, int64_t offset) {
        int64_t extent = 0;  // the last element's index + 1
        for (size_t i = 0; i < sizes.size(); ++i) {
          if (sizes[i] == 0) extent = -1;
          if (extent >= 0) extent += (sizes[i] - 1) * strides.at(i);
        }
        TR_CHECK(sizes.size() == strides.size() && offset >= 0 &&
                     (extent < 0 || static_cast<size_t>((offset + extent + 1) * element_size(dtype)) <= s->nbytes()),
                 ValueError, "_tensor_on_storage: sizes {} strides {} at offset {} do not fit a storage of {} bytes",
                 sizes, strides, offset, s->nbytes());
        return Tensor(intrusive_ptr<TensorImpl>::make(s, dtype, sizes, strides, offset));
      },
      py::arg("storage"), py::arg("dtype"), py::arg("size"), py::arg("stride"), py::arg("storage_offset"));
  m.def("_shared_memory_stats", [] {
    const SharedMemoryStats stats = shared_memory_stats();
    return py::make_tuple(stats.segments, stats.bytes);
  });
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
