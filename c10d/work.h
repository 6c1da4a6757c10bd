#pragma once
// torch.distributed Work: the handle an async collective returns at once.
// It completes (with success or an exception) on the group's worker thread;
// callers wait with a deadline, poll, or chain callbacks with then() (DDP
// chains its bucket reductions this way).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace trainrun {
namespace c10d {

class Work : public std::enable_shared_from_this<Work> {
 public:
  explicit Work(std::string description) : description_(std::move(description)) {}
  virtual ~Work() = default;

  // "allreduce #12 on group 'default'" and the like; errors start with it.
  const std::string& description() const { return description_; }
  bool is_completed() const;
  bool is_success() const;
  // The failure, once completed with one (null otherwise).
  std::exception_ptr exception() const;

  // Blocks until completion; rethrows the failure. With a timeout, throws
  // TimeoutError naming the work when it is not done by then (the work
  // itself carries on and may still complete).
  // A GPU backend's work may instead make the caller's current stream wait
  // for it and return at once (see nccl/work_nccl.h).
  virtual void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // Runs fn(*this) once this work completes (at once, on the calling thread,
  // if it already has; else on the thread that completes it). The returned
  // work completes after fn, failing when this work or fn failed.
  std::shared_ptr<Work> then(std::function<void(Work&)> fn);

  // Runs fn() once this work completes, successfully or not (at once when it
  // already has; else on the completing thread). For wrappers that must see
  // failures too; then() is the usual way to chain.
  void on_completion(std::function<void()> fn);

  // Runs a then() callback; a GPU backend's work runs it with its stream
  // current and waits for what it queued there before the chained work
  // completes (so that work is ready for any stream that waits on it).
  virtual void run_callback(const std::function<void()>& fn) { fn(); }

  // For p2p receives from any source: the rank the message came from.
  int source_rank() const { return source_rank_; }

  // When the backend started running it (nanoseconds since the epoch; 0: not
  // yet, or a backend that does not say). The flight recorder reads it.
  int64_t started_ns() const { return started_ns_.load(std::memory_order_relaxed); }

  // Called by the backend: when it starts running the work (optional), and
  // when it is done (once).
  void mark_started();
  void finish(std::exception_ptr error = nullptr);
  void set_source_rank(int rank) { source_rank_ = rank; }

 private:
  std::string description_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void()>> callbacks_;
  int source_rank_ = -1;
  std::atomic<int64_t> started_ns_{0};
};

// Waits for every work, then rethrows the first failure (so that none is
// left running unobserved).
void wait_all(const std::vector<std::shared_ptr<Work>>& works,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt);

}  // namespace c10d
}  // namespace trainrun
