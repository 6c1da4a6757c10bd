#include "autograd/saved_tensor_hooks.h"

#include <vector>

#include "base/error.h"

namespace trainrun {
namespace {
thread_local std::vector<std::shared_ptr<const SavedTensorHooks>> hook_stack;
}  // namespace

void push_saved_tensor_hooks(std::shared_ptr<const SavedTensorHooks> hooks) { hook_stack.push_back(std::move(hooks)); }

void pop_saved_tensor_hooks() {
  TR_CHECK(!hook_stack.empty(), ValueError, "saved_tensors_hooks: popped more hooks than were pushed");
  hook_stack.pop_back();
}

std::shared_ptr<const SavedTensorHooks> current_saved_tensor_hooks() {
  return hook_stack.empty() ? nullptr : hook_stack.back();
}

}  // namespace trainrun
