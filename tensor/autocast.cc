#include "tensor/autocast.h"

#include <string>
#include <unordered_map>

#include "tensor/dispatcher.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace {

enum class CastPolicy { LowerPrecision, Float32 };

struct OpPolicy {
  CastPolicy policy;
  int inputs;  // the first `inputs` tensor arguments are cast; a defined tensor after them is an out=
};

// PyTorch's lists, for the ops trainrun has (matmul and linear decompose
// into these; the losses are cast to float32 where they are defined, in
// Python). The lists differ by device as PyTorch's do: on the CPU only the
// matrix products and convolutions change dtype. Unknown names cost nothing.
using PolicyTable = std::unordered_map<std::string, OpPolicy>;

const PolicyTable& lower_precision_ops() {
  static const auto* table = new PolicyTable{
      {"mm", {CastPolicy::LowerPrecision, 2}},      {"addmm", {CastPolicy::LowerPrecision, 3}},
      {"bmm", {CastPolicy::LowerPrecision, 2}},     {"baddbmm", {CastPolicy::LowerPrecision, 3}},
      {"mv", {CastPolicy::LowerPrecision, 2}},      {"dot", {CastPolicy::LowerPrecision, 2}},
      {"conv2d", {CastPolicy::LowerPrecision, 3}},
  };
  return *table;
}

const PolicyTable& policies(DeviceType type) {
  static const auto* cuda = [] {
    auto* table = new PolicyTable(lower_precision_ops());
    table->insert({
        {"softmax", {CastPolicy::Float32, 1}},   {"log_softmax", {CastPolicy::Float32, 1}},
        {"layer_norm", {CastPolicy::Float32, 3}}, {"rms_norm", {CastPolicy::Float32, 2}},
        {"logsumexp", {CastPolicy::Float32, 1}},  {"sum", {CastPolicy::Float32, 1}},
        {"prod", {CastPolicy::Float32, 1}},       {"cumsum", {CastPolicy::Float32, 1}},
        {"norm", {CastPolicy::Float32, 1}},       {"pow", {CastPolicy::Float32, 2}},
    });
    return table;
  }();
  return type == DeviceType::CUDA ? *cuda : lower_precision_ops();
}

thread_local AutocastState t_cpu, t_cuda;

AutocastState& state_of(DeviceType type) { return type == DeviceType::CUDA ? t_cuda : t_cpu; }

// Casts `t` to the op's dtype when autocast covers its device and it is floating.
void cast_input(Tensor& t, CastPolicy policy) {
  if (!t.defined() || !is_floating(t.dtype())) return;
  const AutocastState& s = state_of(t.device().type);
  if (!s.enabled) return;
  const DType target = policy == CastPolicy::Float32 ? DType::Float32 : s.dtype;
  if (t.dtype() != target) t = t.to(target);
}

DeviceType device_of_first_tensor(Stack& stack) {
  for (IValue& v : stack) {
    if (v.is_tensor() && v.get<Tensor>().defined()) return v.get<Tensor>().device().type;
  }
  return DeviceType::CPU;
}

void autocast_kernel(const OpTable& op, DispatchKey key, DispatchKeySet keys, Stack& stack) {
  const PolicyTable& table = policies(device_of_first_tensor(stack));
  auto it = table.find(op.name());
  if (it != table.end()) {
    std::vector<Tensor*> inputs;
    bool has_out = false;
    int seen = 0;
    for (IValue& v : stack) {
      if (!v.is_tensor()) continue;
      Tensor& t = v.get<Tensor>();
      if (seen++ < it->second.inputs) {
        inputs.push_back(&t);
      } else if (t.defined()) {
        has_out = true;
      }
    }
    if (!has_out) {
      ExcludeDispatchKeyGuard no_autocast(DispatchKey::Autocast);  // the casts themselves are plain ops
      for (Tensor* t : inputs) cast_input(*t, it->second.policy);
    }
  }
  op.redispatch_boxed(key, keys, stack);
}

const bool g_registered = [] {
  KeyFallback fallback;
  fallback.kind = KeyFallback::Boxed;
  fallback.kernel = autocast_kernel;
  fallback.unboxable_falls_through = true;
  Dispatcher::get().set_fallback(DispatchKey::Autocast, fallback);
  return true;
}();

}  // namespace

AutocastState autocast_state(DeviceType type) { return state_of(type); }

void set_autocast_state(DeviceType type, AutocastState state) {
  (void)g_registered;
  TR_CHECK(!state.enabled || is_floating(state.dtype), TypeError,
           "autocast: the lower-precision dtype must be floating (bfloat16 or float16), got {}", dtype_name(state.dtype));
  state_of(type) = state;
  DispatchKeySet& included = tls_included_keys();
  included = (t_cpu.enabled || t_cuda.enabled) ? included | DispatchKeySet(DispatchKey::Autocast)
                                               : included - DispatchKeySet(DispatchKey::Autocast);
}

bool autocast_enabled_for(Device device) { return state_of(device.type).enabled; }

}  // namespace trainrun
