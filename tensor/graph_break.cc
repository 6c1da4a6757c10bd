#include "tensor/graph_break.h"

namespace trainrun {

GraphBreakHook& graph_break_hook() {
  static GraphBreakHook hook = nullptr;
  return hook;
}

TensorAllocatedHook& tensor_allocated_hook() {
  static TensorAllocatedHook hook = nullptr;
  return hook;
}

}  // namespace trainrun
