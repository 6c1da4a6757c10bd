#include "tensor/cuda/event.h"

#include <utility>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"

namespace trainrun::cuda {

Event::~Event() {
  if (event_ != nullptr) {
    int now = -1;
    cudaGetDevice(&now);
    if (now != device_) cudaSetDevice(device_);
    cudaEventDestroy(event_);
    if (now != device_ && now >= 0) cudaSetDevice(now);
  }
}

Event::Event(Event&& o) noexcept { *this = std::move(o); }

Event& Event::operator=(Event&& o) noexcept {
  std::swap(enable_timing_, o.enable_timing_);
  std::swap(blocking_, o.blocking_);
  std::swap(recorded_, o.recorded_);
  std::swap(device_, o.device_);
  std::swap(event_, o.event_);
  return *this;
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  DeviceGuard guard(stream.device());
  if (event_ == nullptr) {
    unsigned flags = (enable_timing_ ? cudaEventDefault : cudaEventDisableTiming) |
                     (blocking_ ? cudaEventBlockingSync : 0u);
    TR_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
    device_ = stream.device();
  }
  TR_CHECK(device_ == stream.device(), CudaError,
           "Event: recorded on cuda:{} before, cannot record on a stream of cuda:{}", device_, stream.device());
  TR_CUDA_CHECK(cudaEventRecord(event_, stream.handle()));
  recorded_ = true;
}

void Event::block(const Stream& stream) const {
  if (!recorded()) return;
  DeviceGuard guard(stream.device());
  TR_CUDA_CHECK(cudaStreamWaitEvent(stream.handle(), event_, 0));
}

bool Event::query() const {
  if (!recorded()) return true;
  return TR_CUDA_QUERY(cudaEventQuery(event_));
}

void Event::synchronize() const {
  if (recorded()) TR_CUDA_CHECK(cudaEventSynchronize(event_));
}

float Event::elapsed_time(const Event& end) const {
  TR_CHECK(enable_timing_ && end.enable_timing_, CudaError,
           "Event.elapsed_time: both events must be created with enable_timing=true");
  TR_CHECK(recorded() && end.recorded(), CudaError, "Event.elapsed_time: both events must be recorded first");
  float ms = 0;
  TR_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

}  // namespace trainrun::cuda
