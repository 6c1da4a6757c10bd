#pragma once
// What graph capture (compile/graph_capture.h) cannot replay, told by the
// layers that do it: a module's hooks (Python code that runs around
// forward), a collective (not a dispatcher op). Capture installs the hook
// while it records; without one, note_graph_break costs a load and a test.
#include <string>

namespace trainrun {

using GraphBreakHook = void (*)(const std::string& reason);
GraphBreakHook& graph_break_hook();

inline void note_graph_break(const char* reason) {
  if (GraphBreakHook hook = graph_break_hook()) hook(reason);
}

// A tensor made by empty_strided (every factory's allocation, and every
// kernel's): capture records those made outside any op (a factory called
// by the model) as allocations to repeat, not as constants.
class Tensor;
using TensorAllocatedHook = void (*)(const Tensor& t);
TensorAllocatedHook& tensor_allocated_hook();

inline void note_tensor_allocated(const Tensor& t) {
  if (TensorAllocatedHook hook = tensor_allocated_hook()) hook(t);
}

}  // namespace trainrun
