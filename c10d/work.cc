#include "c10d/work.h"

#include "base/error.h"

namespace trainrun {
namespace c10d {

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && !error_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout) {
    if (!done_cv_.wait_for(lock, *timeout, [&] { return done_; }))
      throw TimeoutError(fmt::format("{}: not completed after waiting {} ms", description_, timeout->count()));
  } else {
    done_cv_.wait(lock, [&] { return done_; });
  }
  if (error_) std::rethrow_exception(error_);
}

void Work::mark_started() {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  int64_t unset = 0;
  started_ns_.compare_exchange_strong(unset, now, std::memory_order_relaxed);
}

void Work::finish(std::exception_ptr error) {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    error_ = error;
    callbacks.swap(callbacks_);
  }
  done_cv_.notify_all();
  for (auto& cb : callbacks) cb();
}

std::shared_ptr<Work> Work::then(std::function<void(Work&)> fn) {
  auto next = std::make_shared<Work>(description_ + " (then)");
  auto self = shared_from_this();
  auto run = [self, next, fn = std::move(fn)] {
    if (self->exception()) {
      next->finish(self->exception());
      return;
    }
    try {
      self->run_callback([&] { fn(*self); });
      next->finish();
    } catch (...) {
      next->finish(std::current_exception());
    }
  };
  on_completion(std::move(run));
  return next;
}

void Work::on_completion(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void wait_all(const std::vector<std::shared_ptr<Work>>& works, std::optional<std::chrono::milliseconds> timeout) {
  std::exception_ptr first;
  for (const auto& w : works) {
    try {
      w->wait(timeout);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace c10d
}  // namespace trainrun
