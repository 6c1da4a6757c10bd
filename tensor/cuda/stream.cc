#include "tensor/cuda/stream.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"

namespace trainrun::cuda {
namespace {

constexpr int kStreamsPerPool = 32;
constexpr int kMaxDevices = 64;

struct DevicePools {
  std::once_flag created;
  std::array<cudaStream_t, kStreamsPerPool> low{}, high{};
  std::atomic<uint32_t> next_low{0}, next_high{0};
};

DevicePools& pools(int device) {
  static std::array<DevicePools, kMaxDevices>* all = new std::array<DevicePools, kMaxDevices>();
  TR_CHECK(device >= 0 && device < kMaxDevices, CudaError, "CUDA device index {} is out of range", device);
  DevicePools& p = (*all)[device];
  std::call_once(p.created, [&] {
    DeviceGuard guard(device);
    int least = 0, greatest = 0;
    TR_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int i = 0; i < kStreamsPerPool; ++i) {
      TR_CUDA_CHECK(cudaStreamCreateWithPriority(&p.low[i], cudaStreamNonBlocking, least));
      TR_CUDA_CHECK(cudaStreamCreateWithPriority(&p.high[i], cudaStreamNonBlocking, greatest));
    }
  });
  return p;
}

// This thread's current stream per device; nullptr entries mean "default".
std::vector<cudaStream_t>& current_streams() {
  thread_local std::vector<cudaStream_t> streams;
  return streams;
}

int resolve(int device) { return device < 0 ? current_device() : (check_device(device), device); }

}  // namespace

bool Stream::query() const {
  DeviceGuard guard(device_);
  return TR_CUDA_QUERY(cudaStreamQuery(handle_));
}

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  TR_CUDA_CHECK(cudaStreamSynchronize(handle_));
}

Stream default_stream(int device) { return Stream(resolve(device), nullptr); }

Stream current_stream(int device) {
  device = resolve(device);
  auto& streams = current_streams();
  cudaStream_t s = device < static_cast<int>(streams.size()) ? streams[device] : nullptr;
  return Stream(device, s);
}

void set_current_stream(const Stream& stream) {
  auto& streams = current_streams();
  if (static_cast<int>(streams.size()) <= stream.device()) streams.resize(stream.device() + 1, nullptr);
  streams[stream.device()] = stream.handle();
}

Stream stream_from_pool(int device, bool high_priority) {
  device = resolve(device);
  DevicePools& p = pools(device);
  auto& next = high_priority ? p.next_high : p.next_low;
  const auto& pool = high_priority ? p.high : p.low;
  return Stream(device, pool[next.fetch_add(1) % kStreamsPerPool]);
}

StreamGuard::StreamGuard(const Stream& stream)
    : previous_device_(current_device()), previous_stream_(current_stream(stream.device())) {
  if (stream.device() != previous_device_) set_device(stream.device());
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() {
  set_current_stream(previous_stream_);
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_device_) cudaSetDevice(previous_device_);
}

}  // namespace trainrun::cuda
