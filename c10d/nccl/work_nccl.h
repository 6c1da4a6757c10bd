#pragma once
// The Work of an NCCL collective. Its end is an event on the group's NCCL
// stream; the group's watchdog polls it and completes the work (or fails it
// when the group's timeout passes first). wait() makes the caller's current
// stream wait for the collective and returns at once, as PyTorch's does; the
// CPU blocks only for barrier() and under TRAINRUN_NCCL_BLOCKING_WAIT=1.
#include <chrono>
#include <vector>

#include "c10d/process_group.h"
#include "tensor/cuda/event.h"

namespace trainrun {
namespace c10d {

class WorkNCCL final : public Work {
 public:
  WorkNCCL(std::string description, int device, bool cpu_wait, Milliseconds timeout);

  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt) override;
  // then() callbacks run on the NCCL stream, which is synchronized after them.
  void run_callback(const std::function<void()>& fn) override;

  // Marks the collective's end on `stream` and keeps `tensors` alive until it.
  void record_end(const cuda::Stream& stream, std::vector<Tensor> tensors);
  // Polled by the watchdog: the GPU has finished the collective.
  bool gpu_done() const { return end_.query(); }
  // Completes the work and lets its tensors go.
  void complete(std::exception_ptr error);
  std::chrono::steady_clock::time_point started() const { return started_; }
  int device() const { return device_; }

 private:
  int device_;
  bool cpu_wait_;
  Milliseconds timeout_;
  std::chrono::steady_clock::time_point started_;
  cuda::Event end_;
  cuda::Stream stream_{0};
  std::vector<Tensor> tensors_;
};

}  // namespace c10d
}  // namespace trainrun
