// Sharing device memory between processes: the node's broker
// (launcher/ipc_broker.h) for trainrun.multiprocessing to host when no agent
// does, and CUDA IPC exports and imports (tensor/cuda/ipc.h) for the
// pickling of CUDA tensors (trainrun/multiprocessing/_reductions.py).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "launcher/ipc_broker.h"
#include "python/csrc/bindings.h"
#include "tensor/cuda/ipc.h"

namespace trainrun {
namespace python {

void bind_ipc(py::module_& m) {
  py::class_<IpcBroker>(m, "_IpcBroker")
      .def(py::init<std::string>(), py::arg("socket_path"))
      .def_property_readonly("socket_path", &IpcBroker::socket_path)
      .def("leak_report", &IpcBroker::leak_report)
      .def("stats", [](const IpcBroker& b) {
        const IpcBrokerStats s = b.stats();
        return py::dict(py::arg("exports_live") = s.exports_live, py::arg("leases_live") = s.leases_live,
                        py::arg("exports_total") = s.exports_total, py::arg("leases_total") = s.leases_total,
                        py::arg("leases_released_by_death") = s.leases_released_by_death,
                        py::arg("clients_connected") = s.clients_connected);
      });

  py::module_ c = m.attr("_cuda");
  c.def(
      "_ipc_export",
      [](const Storage& s) {
        const cuda::IpcHandle h = cuda::export_storage(*s);
        return py::make_tuple(py::bytes(h.memory), py::bytes(h.event), h.device, h.segment_bytes, h.offset, h.nbytes,
                              h.block);
      },
      "Exports a CUDA storage (one lease on its block): (memory, event, device, segment_bytes, offset, nbytes, "
      "block).");
  c.def("_ipc_release_export", &cuda::release_export, py::arg("device"), py::arg("block"));
  c.def(
      "_storage_from_ipc",
      [](py::bytes memory, py::bytes event, int device, size_t segment_bytes, size_t offset, size_t nbytes,
         uintptr_t block, py::object on_release) {
        cuda::IpcHandle h{memory, event, device, segment_bytes, offset, nbytes, block};
        // The storage may die on any thread, with or without the GIL, even at interpreter exit.
        auto* callback = new py::object(std::move(on_release));
        return cuda::storage_from_ipc_handle(h, [callback] {
          if (!Py_IsInitialized()) return;
          py::gil_scoped_acquire gil;
          try {
            if (!callback->is_none()) (*callback)();
          } catch (py::error_already_set& e) {
            e.discard_as_unraisable("releasing a CUDA IPC lease");
          }
          delete callback;
        });
      },
      py::arg("memory"), py::arg("event"), py::arg("device"), py::arg("segment_bytes"), py::arg("offset"),
      py::arg("nbytes"), py::arg("block"), py::arg("on_release"));
  c.def("_ipc_counts", [] { return py::make_tuple(cuda::exported_blocks_leased(), cuda::open_ipc_allocations()); },
        "(leases this process's exports still hold, other processes' allocations open here)");
}

}  // namespace python
}  // namespace trainrun
