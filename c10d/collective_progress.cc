#include "c10d/collective_progress.h"

#include <fmt/format.h>

#include <vector>

namespace trainrun {
namespace c10d {

CollectiveProgress::CollectiveProgress(std::shared_ptr<Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size) {
  thread_ = std::thread([this] { publish_loop(); });
}

CollectiveProgress::~CollectiveProgress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CollectiveProgress::publish(uint32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq <= published_) return;
  store_->set(key(rank_), to_bytes(std::to_string(seq)));
  published_ = seq;
}

void CollectiveProgress::publish_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    const uint32_t seq = entered_.load(std::memory_order_relaxed);
    if (stopping_ || seq <= published_) continue;
    lock.unlock();
    try {
      publish(seq);
    } catch (const std::exception&) {
      // The store is gone (the job is ending); failures report it when asked.
    }
    lock.lock();
  }
}

std::string CollectiveProgress::laggards(uint32_t seq, std::chrono::milliseconds grace) {
  try {
    publish(std::max(seq, entered_.load()));
    const auto deadline = std::chrono::steady_clock::now() + grace;
    std::vector<int64_t> at(size_, 0);
    for (;;) {
      std::vector<int> behind;
      for (int r = 0; r < size_; ++r) {
        if (at[r] >= seq) continue;
        if (store_->check({key(r)})) at[r] = std::stoll(to_string(store_->get(key(r))));
        if (at[r] < seq) behind.push_back(r);
      }
      if (behind.empty()) return fmt::format("every rank of the group had entered #{}", seq);
      if (std::chrono::steady_clock::now() >= deadline) {
        std::vector<std::string> parts;
        for (int r : behind)
          parts.push_back(at[r] == 0 ? fmt::format("{} (none yet)", r) : fmt::format("{} (last at #{})", r, at[r]));
        return fmt::format("ranks that had not entered #{}: {}", seq, fmt::join(parts, ", "));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    return fmt::format("(could not read the ranks' progress from the store: {})", e.what());
  }
}

}  // namespace c10d
}  // namespace trainrun
