#include "autograd/node.h"

#include <atomic>

namespace trainrun {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}  // namespace

Node::Node(std::vector<Edge> next_edges) : next_edges_(std::move(next_edges)), sequence_nr_(g_next_sequence_nr++) {}

void Node::add_tensor_pre_hook(uint32_t output_nr, TensorHook hook) {
  tensor_pre_hooks_[output_nr].push_back(std::move(hook));
}

TensorList Node::run(TensorList&& grad_outputs) {
  for (auto& [slot, hooks] : tensor_pre_hooks_) {
    if (slot >= grad_outputs.size()) continue;
    for (const TensorHook& hook : hooks) {
      if (!grad_outputs[slot].defined()) break;
      Tensor replaced = hook(grad_outputs[slot]);
      if (replaced.defined()) grad_outputs[slot] = replaced;
    }
  }
  for (const PreHook& hook : pre_hooks_) {
    TensorList replaced = hook(grad_outputs);
    if (!replaced.empty()) grad_outputs = std::move(replaced);
  }
  TensorList outputs_for_hooks = post_hooks_.empty() ? TensorList() : grad_outputs;
  TensorList grad_inputs = apply(std::move(grad_outputs));
  for (const PostHook& hook : post_hooks_) hook(grad_inputs, outputs_for_hooks);
  return grad_inputs;
}

}  // namespace trainrun
