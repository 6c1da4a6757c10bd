#pragma once
// Operator-level profiling (PyTorch's RecordFunction): while a profiler
// records, every op called through the dispatcher becomes one event (its
// name, "aten::addmm" or the extension's "ns::op", start and end, thread, and
// with record_shapes its tensor arguments' sizes), and so does each range
// named above it: record_function blocks, the autograd engine's nodes, a
// compiled graph's generated loops. Events nest by time on their thread;
// the profiler (python/trainrun/profiler) builds the tree and self times.
//
// While nothing records, the cost is one relaxed atomic load per op call.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

class OpTable;

namespace profiling {

struct Event {
  std::string name;
  int64_t start_ns = 0, end_ns = 0;  // steady clock
  int64_t thread = 0;                // the OS thread id (gettid), as Python's threading.get_native_id
  std::vector<IntList> shapes;       // per argument (empty for a non-tensor); only with record_shapes
  int64_t memory = 0;                // with profile_memory: bytes allocated less bytes freed on its thread meanwhile
  // Per argument, with record_shapes: an int list's values, an integer's (or a bool's) value as one element,
  // empty otherwise
  // (PyTorch's "concrete inputs": a convolution's stride and padding, which its FLOP count needs).
  std::vector<IntList> concrete;
};

namespace detail {
extern std::atomic<int> g_recording;  // how many profilers record now
extern std::atomic<bool> g_memory;    // whether one of them profiles memory
extern thread_local int64_t t_net_bytes;
}  // namespace detail

inline bool active() { return detail::g_recording.load(std::memory_order_relaxed) > 0; }
// The CPU allocator reports each block it hands out (+) and takes back (-) (profile_memory).
inline void note_memory(int64_t bytes) {
  if (detail::g_memory.load(std::memory_order_relaxed)) detail::t_net_bytes += bytes;
}
// The profiler's clock (nanoseconds, steady).
int64_t now_ns();

// A profiler starts recording: the first one clears what an earlier one left.
// record_shapes: op events carry their arguments' sizes; profile_memory: the
// bytes allocated less freed while they ran (any profiler asking turns either on).
void start(bool record_shapes, bool profile_memory = false);
// It stops; events stay readable until the next first start.
void stop();
// Events recorded since the first start, from the `from`-th on.
std::vector<Event> events(size_t from = 0);
size_t num_events();
// An event whose times are known (a range measured elsewhere: Python's record_function, a profiler step, an
// asynchronous collective ended on its backend's thread and shown on the caller's `thread`), with `memory` bytes
// allocated less freed meanwhile, and (an op run outside the dispatcher: a Python custom op) its arguments' shapes
// and integer values as an op event keeps them.
void add_event(std::string name, int64_t start_ns, int64_t end_ns, int64_t thread, int64_t memory = 0,
               std::vector<IntList> shapes = {}, std::vector<IntList> concrete = {});
// This thread's id as events carry it.
int64_t current_thread();
// Bytes this thread has allocated less freed while memory was profiled (a range's is the difference).
inline int64_t net_bytes() { return detail::t_net_bytes; }

// A range from construction to destruction, recorded if a profiler was recording when it began.
class Range {
 public:
  explicit Range(std::string name);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool on_ = false;
  std::string name_;
  int64_t start_ = 0, bytes_ = 0;
};

// The range of one dispatcher call of `op`. The call an op's autograd
// kernel (or a boxed fallback) makes again below itself is not a second
// event: only the outermost call of an op on a thread's stack records.
class OpRange {
 public:
  template <typename... Args>
  OpRange(const OpTable& op, const Args&... args) {
    if (!begin(op)) return;
    if (shapes_wanted()) {
      shapes_.reserve(sizeof...(Args));
      (shapes_.push_back(shape_of(args)), ...);
      concrete_.reserve(sizeof...(Args));
      (concrete_.push_back(concrete_of(args)), ...);
    }
  }
  ~OpRange();
  OpRange(const OpRange&) = delete;
  OpRange& operator=(const OpRange&) = delete;

 private:
  bool begin(const OpTable& op);
  static bool shapes_wanted();
  static IntList shape_of(const Tensor& t) { return t.defined() ? t.sizes() : IntList{}; }
  static IntList shape_of(const std::optional<Tensor>& t) {
    return t.has_value() && t->defined() ? t->sizes() : IntList{};
  }
  template <typename T>
  static IntList shape_of(const T&) {
    return {};
  }
  static IntList concrete_of(const IntList& values) { return values; }
  static IntList concrete_of(int64_t value) { return {value}; }
  static IntList concrete_of(bool value) { return {value ? 1 : 0}; }
  template <typename T>
  static IntList concrete_of(const T&) {
    return {};
  }
  const OpTable* op_ = nullptr;
  const OpTable* outer_ = nullptr;
  int64_t start_ = 0, bytes_ = 0;
  std::vector<IntList> shapes_, concrete_;
};

}  // namespace profiling
}  // namespace trainrun
