#pragma once
// CUDA streams as PyTorch has them: each device has a default stream, a pool
// of streams handed out round-robin (never destroyed, so memory and events may
// refer to them for the life of the process), and a current stream per thread
// that kernels launch on. Kernels are asynchronous: only copies to the CPU,
// .item() and explicit synchronization wait.
#include <cstdint>

struct CUstream_st;

namespace trainrun::cuda {

class Stream {
 public:
  // The default (legacy, null) stream of `device`.
  explicit Stream(int device, CUstream_st* handle = nullptr) : device_(device), handle_(handle) {}
  int device() const { return device_; }
  CUstream_st* handle() const { return handle_; }
  // Identifies the stream within the process (the allocator keys blocks by it).
  uintptr_t id() const { return reinterpret_cast<uintptr_t>(handle_); }
  // True when all work queued on the stream has finished.
  bool query() const;
  // Blocks the calling thread until the stream's work is done.
  void synchronize() const;
  bool operator==(const Stream& o) const { return device_ == o.device_ && handle_ == o.handle_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

 private:
  int device_;
  CUstream_st* handle_;
};

// The default stream of `device` (-1: the current device).
Stream default_stream(int device = -1);
// This thread's current stream on `device` (-1: the current device); the
// default stream until set.
Stream current_stream(int device = -1);
void set_current_stream(const Stream& stream);
// A stream from the device's pool (non-blocking with respect to the default
// stream); high priority streams come from a second pool.
Stream stream_from_pool(int device = -1, bool high_priority = false);

// Makes `stream` (and its device) current for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int previous_device_;
  Stream previous_stream_;
};

}  // namespace trainrun::cuda
