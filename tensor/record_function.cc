#include "tensor/record_function.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "tensor/dispatcher.h"

namespace trainrun::profiling {

namespace detail {
std::atomic<int> g_recording{0};
std::atomic<bool> g_memory{false};
thread_local int64_t t_net_bytes = 0;
}  // namespace detail

namespace {

struct Recorder {
  std::mutex mu;
  std::vector<Event> events;
  int shapes_wanted = 0;  // how many recording profilers asked for shapes
  int memory_wanted = 0;  // ... and for memory
};

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: ops may run during exit
  return *r;
}

std::atomic<bool> g_shapes{false};

int64_t this_thread() {
  thread_local const int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

// The op whose outermost call is open on this thread (its own redispatch is not a second event).
thread_local const OpTable* t_open_op = nullptr;

void push(Event e) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.events.push_back(std::move(e));
}

std::string event_name(const OpTable& op) {
  const std::string& name = op.name();
  return name.find("::") == std::string::npos ? "aten::" + name : name;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start(bool record_shapes, bool profile_memory) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  if (detail::g_recording.load() == 0) {
    r.events.clear();
    r.shapes_wanted = r.memory_wanted = 0;
  }
  r.shapes_wanted += record_shapes;
  r.memory_wanted += profile_memory;
  g_shapes.store(r.shapes_wanted > 0);
  detail::g_memory.store(r.memory_wanted > 0);
  detail::g_recording.fetch_add(1);
}

void stop() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  TR_CHECK(detail::g_recording.load() > 0, ValueError, "profiling::stop: no profiler is recording");
  if (detail::g_recording.fetch_sub(1) == 1) detail::g_memory.store(false);
}

std::vector<Event> events(size_t from) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  if (from >= r.events.size()) return {};
  return std::vector<Event>(r.events.begin() + static_cast<std::ptrdiff_t>(from), r.events.end());
}

size_t num_events() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.events.size();
}

void add_event(std::string name, int64_t start_ns, int64_t end_ns, int64_t thread, int64_t memory,
               std::vector<IntList> shapes, std::vector<IntList> concrete) {
  if (!active()) return;
  push(Event{std::move(name), start_ns, end_ns, thread, std::move(shapes), memory, std::move(concrete)});
}

int64_t current_thread() { return this_thread(); }

Range::Range(std::string name) {
  if (!active()) return;
  on_ = true;
  name_ = std::move(name);
  bytes_ = detail::t_net_bytes;
  start_ = now_ns();
}

Range::~Range() {
  if (on_) push(Event{std::move(name_), start_, now_ns(), this_thread(), {}, detail::t_net_bytes - bytes_});
}

bool OpRange::begin(const OpTable& op) {
  if (t_open_op == &op) return false;  // the op's own call again, below its autograd kernel or a fallback
  op_ = &op;
  outer_ = t_open_op;
  t_open_op = &op;
  bytes_ = detail::t_net_bytes;
  start_ = now_ns();
  return true;
}

bool OpRange::shapes_wanted() { return g_shapes.load(std::memory_order_relaxed); }

OpRange::~OpRange() {
  if (op_ == nullptr) return;
  const int64_t end = now_ns();
  t_open_op = outer_;
  push(Event{event_name(*op_), start_, end, this_thread(), std::move(shapes_), detail::t_net_bytes - bytes_,
             std::move(concrete_)});
}

}  // namespace trainrun::profiling
