#pragma once
// CUDA events: markers recorded on a stream that other streams can wait for
// without blocking the CPU, and that time GPU work. Created lazily on the
// device of the first stream they are recorded on.
#include "tensor/cuda/stream.h"

struct CUevent_st;

namespace trainrun::cuda {

class Event {
 public:
  explicit Event(bool enable_timing = false, bool blocking = false)
      : enable_timing_(enable_timing), blocking_(blocking) {}
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the current end of `stream`'s work (default: the current stream).
  void record();
  void record(const Stream& stream);
  // Makes `stream` wait (on the GPU) for the recorded work; the CPU goes on.
  // A never-recorded event is complete, so waiting on it does nothing.
  void block(const Stream& stream) const;
  // True when the recorded work has finished (or nothing was recorded).
  bool query() const;
  // Blocks the CPU until the recorded work has finished.
  void synchronize() const;
  // Milliseconds from this event to `end` (both recorded, with timing).
  float elapsed_time(const Event& end) const;
  bool recorded() const { return event_ != nullptr && recorded_; }
  int device() const { return device_; }
  CUevent_st* handle() const { return event_; }

 private:
  bool enable_timing_;
  bool blocking_;
  bool recorded_ = false;
  int device_ = -1;
  CUevent_st* event_ = nullptr;
};

}  // namespace trainrun::cuda
