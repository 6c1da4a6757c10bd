#pragma once
// Automatic mixed precision (torch.autocast): while it is on for a device
// type on this thread, the ops that gain from lower precision (matrix
// products, convolutions) run in its dtype (bfloat16 on the CPU, float16 on
// CUDA by default), the ops that lose accuracy there (softmax, norms, sums,
// log-sum-exp) run in float32, and every other op runs in its inputs' dtype.
//
// It is a dispatch key (DispatchKey::Autocast, above Autograd): its boxed
// kernel casts the floating inputs of the listed ops and lets the op go on,
// so autograd records the casts and each gradient returns in the dtype of
// the tensor it belongs to (float32 parameters get float32 gradients).
// Ops called with an out= tensor are left alone, as in PyTorch.
#include "tensor/device.h"
#include "tensor/dtype.h"

namespace trainrun {

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::Float32;
};

// This thread's autocast state for a device type (CPU or CUDA).
AutocastState autocast_state(DeviceType type);
// Turns autocast on or off for a device type on this thread (the key is
// switched on while any device type has it on).
void set_autocast_state(DeviceType type, AutocastState state);
// Whether autocast is on for tensors on `device`: the checks that two
// operands share a dtype defer to autocast's casts then.
bool autocast_enabled_for(Device device);

}  // namespace trainrun
