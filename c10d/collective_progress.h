#pragma once
// Which collective each rank of a group has reached, kept in the group's
// store, so that a failed or timed-out collective can say which ranks had
// not entered it ("rank 2 is at #4") instead of a bare "timeout". A rank
// publishes its latest collective number from a background thread at most
// every 100 ms (no store round trip on the collective's own path).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "store/store.h"

namespace trainrun {
namespace c10d {

class CollectiveProgress {
 public:
  CollectiveProgress(std::shared_ptr<Store> store, int rank, int size);
  ~CollectiveProgress();
  CollectiveProgress(const CollectiveProgress&) = delete;
  CollectiveProgress& operator=(const CollectiveProgress&) = delete;

  // This rank has entered collective number `seq`.
  void entered(uint32_t seq) { entered_.store(seq, std::memory_order_relaxed); }

  // After collective `seq` failed: publishes this rank's number now, gives
  // the other ranks up to `grace` to reach seq, and describes those that did
  // not ("ranks that had not entered it: 2 (last at #4), 3 (none yet)"), or
  // says that every rank had. Never throws: a store that cannot be read is
  // reported in the text.
  std::string laggards(uint32_t seq, std::chrono::milliseconds grace);

 private:
  void publish_loop();
  void publish(uint32_t seq);
  std::string key(int rank) const { return "progress/" + std::to_string(rank); }

  std::shared_ptr<Store> store_;
  int rank_, size_;
  std::atomic<uint32_t> entered_{0};
  uint32_t published_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace c10d
}  // namespace trainrun
