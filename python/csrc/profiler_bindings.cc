// trainrun.profiler's recorder (tensor/record_function.h): start and stop
// recording, the events so far as tuples, and ranges timed in Python.
#include <pybind11/stl.h>

#include "python/csrc/bindings.h"
#include "tensor/record_function.h"

namespace trainrun {
namespace python {

void bind_profiler(py::module_& m) {
  m.def("_profiler_start", &profiling::start, py::arg("record_shapes"), py::arg("profile_memory") = false);
  m.def("_profiler_stop", &profiling::stop);
  m.def("_profiler_active", &profiling::active);
  m.def("_profiler_now_ns", &profiling::now_ns);
  m.def("_profiler_num_events", &profiling::num_events);
  // shapes/concrete: per argument, as an op event's (a Python custom op's, recorded like a dispatcher op).
  m.def("_profiler_add_event", [](std::string name, int64_t start_ns, int64_t end_ns, int64_t memory,
                                  std::vector<IntList> shapes, std::vector<IntList> concrete) {
    profiling::add_event(std::move(name), start_ns, end_ns, profiling::current_thread(), memory, std::move(shapes),
                         std::move(concrete));
  }, py::arg("name"), py::arg("start_ns"), py::arg("end_ns"), py::arg("memory") = 0,
     py::arg("shapes") = std::vector<IntList>{}, py::arg("concrete") = std::vector<IntList>{});
  m.def("_profiler_net_bytes", &profiling::net_bytes);
  // (name, start_ns, end_ns, thread, shapes, memory, concrete inputs) per event, from the `from`-th.
  m.def("_profiler_events", [](size_t from) {
    std::vector<profiling::Event> events = profiling::events(from);
    auto lists = [](const std::vector<IntList>& per_argument) {
      py::list out;
      for (const IntList& values : per_argument) {
        py::list items;
        for (int64_t v : values) items.append(v);
        out.append(items);
      }
      return out;
    };
    py::list out;
    for (const profiling::Event& e : events) {
      out.append(py::make_tuple(py::str(e.name), e.start_ns, e.end_ns, e.thread, lists(e.shapes), e.memory,
                                lists(e.concrete)));
    }
    return out;
  }, py::arg("from") = 0);
}

}  // namespace python
}  // namespace trainrun
