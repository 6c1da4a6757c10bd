#pragma once
// Fused loops for a device other than the CPU. The fuser (compile/fusion.h)
// plans loops the same way whatever the device; a device's backend, linked
// in by its own library (compile/cuda/ for CUDA) and registered at static
// initialisation, turns the plans into kernels. Without a backend for a
// device, its ops are not fused and replay one by one.
#include <memory>
#include <string>
#include <vector>

#include "compile/pointwise_codegen.h"
#include "tensor/device.h"

namespace trainrun::compile {

struct FusedKernel;

// One loop built for a device: launches its kernel on the inputs, making the outputs.
class DeviceLoop {
 public:
  virtual ~DeviceLoop() = default;
  virtual void run(const FusedKernel& kernel, const std::vector<Tensor>& in, std::vector<Tensor>& out) const = 0;
};

class DeviceLoopBackend {
 public:
  virtual ~DeviceLoopBackend() = default;
  // One loop per plan (names[i] for plans[i]) for `device`, compiled together. Throws ValueError when the
  // device's compiler is missing or fails (the graph then replays unfused).
  virtual std::vector<std::shared_ptr<const DeviceLoop>> build(const std::vector<std::string>& names,
                                                               const std::vector<LoopPlan>& plans,
                                                               Device device) = 0;
  // Whether the plan, over rows x cols, is worth a loop on this device; false leaves its ops to the eager
  // kernels (say, a reduction the device's kernels split over many blocks where a loop would use one).
  virtual bool fits(const LoopPlan& plan, int64_t rows, int64_t cols) const = 0;
};

// The backend stays registered for the life of the process.
void register_device_loop_backend(DeviceType type, DeviceLoopBackend* backend);
// The backend for `type`, or nullptr when none is linked in.
DeviceLoopBackend* device_loop_backend(DeviceType type);

}  // namespace trainrun::compile
