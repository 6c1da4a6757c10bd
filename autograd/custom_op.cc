#include "autograd/custom_op.h"

#include <mutex>
#include <unordered_map>

#include "autograd/functions/record.h"
#include "tensor/dispatcher.h"

namespace trainrun {
namespace {

using CustomSig = CustomOpSignature;

// What register_custom_op was given, and the op's dispatcher handle.
struct CustomOpEntry {
  CustomOpDefinition definition;
  Op<CustomSig> op;
};

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
// Entries are never removed, so references into the map stay valid.
std::unordered_map<std::string, CustomOpEntry>& registry() {
  static auto* r = new std::unordered_map<std::string, CustomOpEntry>();
  return *r;
}

const CustomOpEntry& entry(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(name);
  TR_CHECK(it != registry().end(), ValueError, "custom op '{}' is not registered", name);
  return it->second;
}

Tensor cpu_trampoline(const std::string& name, const TensorList& inputs) {
  return entry(name).definition.cpu(inputs);
}
Tensor cuda_trampoline(const std::string& name, const TensorList& inputs) {
  return entry(name).definition.cuda(inputs);
}

Tensor autograd_trampoline(const std::string& name, const TensorList& inputs) {
  const CustomOpEntry& e = entry(name);
  const Op<CustomSig>& op = e.op;
  auto backward = e.definition.backward;
  return record(
      (name + "Backward").c_str(), inputs, inputs, /*save_result=*/true,
      [&] {
        DispatchKeySet keys;
        for (const Tensor& t : inputs) keys = keys | keys_of(t);
        return op.call(keys, name, inputs);
      },
      [backward, n = inputs.size(), name](const Tensor& g, const TensorList& saved) -> TensorList {
        TensorList in(saved.begin(), saved.begin() + static_cast<std::ptrdiff_t>(n));
        TensorList grads = backward(g, in, saved.back());
        TR_CHECK(grads.size() == n, ValueError, "custom op '{}': backward returned {} gradients for {} inputs", name,
                 grads.size(), n);
        return grads;
      });
}

}  // namespace

CustomOp register_custom_op(const std::string& name, CustomOpDefinition def) {
  const size_t sep = name.find("::");
  TR_CHECK(sep != std::string::npos && sep > 0 && sep + 2 < name.size(), ValueError,
           "register_custom_op: '{}' must be namespaced, like 'my_ext::fused_gelu'", name);
  TR_CHECK(static_cast<bool>(def.cpu), ValueError, "register_custom_op('{}'): a CPU kernel is required", name);
  Op<CustomSig> op(name);
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    TR_CHECK(!registry().count(name), ValueError, "register_custom_op: '{}' is already registered", name);
    registry().emplace(name, CustomOpEntry{def, op});
  }
  op.register_kernel(static_cast<int>(DispatchKey::CPU), &cpu_trampoline);
  if (def.cuda) op.register_kernel(static_cast<int>(DispatchKey::CUDA), &cuda_trampoline);
  if (def.backward) op.register_kernel(static_cast<int>(DispatchKey::Autograd), &autograd_trampoline);
  return CustomOp(name);
}

Tensor CustomOp::operator()(const TensorList& inputs) const {
  TR_CHECK(!inputs.empty(), ValueError, "custom op '{}': called without inputs", name_);
  DispatchKeySet keys;
  for (const Tensor& t : inputs) keys = keys | keys_of(t);
  return op_.call(keys, name_, inputs);
}

}  // namespace trainrun
