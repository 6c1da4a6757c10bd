#include "c10d/nccl/work_nccl.h"

#include "tensor/cuda/stream.h"

namespace trainrun {
namespace c10d {

WorkNCCL::WorkNCCL(std::string description, int device, bool cpu_wait, Milliseconds timeout)
    : Work(std::move(description)),
      device_(device),
      cpu_wait_(cpu_wait),
      timeout_(timeout),
      started_(std::chrono::steady_clock::now()) {}

void WorkNCCL::record_end(const cuda::Stream& stream, std::vector<Tensor> tensors) {
  stream_ = stream;
  end_.record(stream);
  tensors_ = std::move(tensors);
}

void WorkNCCL::complete(std::exception_ptr error) {
  finish(error);
  tensors_.clear();
}

void WorkNCCL::run_callback(const std::function<void()>& fn) {
  cuda::StreamGuard on_stream(stream_);
  fn();
  stream_.synchronize();
}

void WorkNCCL::wait(std::optional<std::chrono::milliseconds> timeout) {
  if (cpu_wait_) {
    // Blocks until the watchdog sees the end (or fails the work at the
    // group's timeout, whichever the caller's timeout does not beat).
    Work::wait(timeout.value_or(timeout_ + std::chrono::seconds(5)));
    return;
  }
  if (std::exception_ptr e = exception()) std::rethrow_exception(e);
  end_.block(cuda::current_stream(device_));
}

}  // namespace c10d
}  // namespace trainrun
