#pragma once
// The flight recorder: the last TRAINRUN_FR_BUFFER_SIZE collectives (and
// point-to-point operations) this process issued, on every group and
// backend, each with its group, sequence number, what was called
// ("allreduce(float32 [4], SUM)"), its state (scheduled, started,
// completed, failed) and when it was enqueued, started and ended.
// PyTorch keeps one for NCCL only; here ProcessGroupWrapper records for
// every backend (Gloo, shared memory, NCCL), which all groups go through.
//
// When a collective fails or times out, the rank that saw it dumps its record
// to TRAINRUN_FR_DUMP_DIR/rank<R>.json and asks every other rank, through the
// job's store, to dump theirs: a watcher thread in each process (started by
// init_process_group when the directory is set; the launcher's agent sets it)
// answers within a poll interval. The agent reads the dumps and says which
// rank is behind on which collective, and which ranks called different ones
// (launcher/flight_analysis.h). The record is also read on demand:
// trainrun.distributed.flight_record() and the agent's GetFlightRecord.
//
// Cost: a mutex and the call's description per operation (measured against
// a 4 KiB allreduce in bench/agent.py).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "c10d/collective_call.h"
#include "c10d/work.h"
#include "store/store.h"

namespace trainrun {
namespace c10d {

class FlightRecorder {
 public:
  enum class Kind { Collective, PointToPoint };

  // One recorded operation, as dumps show it.
  struct Entry {
    uint64_t id = 0;   // this process's count of recorded operations
    int group = -1;    // index into groups()
    uint32_t seq = 0;  // the group's collective number (#1, #2, ...) or p2p number
    Kind kind = Kind::Collective;
    std::string op;                                            // "allreduce(float32 [4], SUM)"
    std::string state;                                         // "scheduled", "started", "completed", "failed"
    int64_t created_ns = 0, started_ns = 0, completed_ns = 0;  // since the epoch; 0: not yet
    std::string error;                                         // the failure's message, for "failed"
    std::weak_ptr<Work> work;  // the backend's work, while it is pending (for its start time)
  };
  struct Group {
    std::string name, backend;
    std::vector<int> ranks;  // global ranks, in group-rank order
  };

  // The process's recorder; its capacity is TRAINRUN_FR_BUFFER_SIZE
  // (default 2000 operations; 0 turns recording off).
  static FlightRecorder& global();
  explicit FlightRecorder(size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ > 0; }
  size_t capacity() const { return capacity_; }

  // A group's index for record(); a group registers once, when its ranks are final.
  int register_group(const std::string& name, const std::string& backend, const std::vector<int>& global_ranks);
  // Records an issued operation and returns its id (0 when recording is off).
  uint64_t record(int group, uint32_t seq, Kind kind, CollectiveCall call, const std::shared_ptr<Work>& work);
  // The operation ended: completed, or failed with `error` (non-empty);
  // `started_ns` is its work's started_ns().
  void completed(uint64_t id, int64_t started_ns, const std::string& error);

  // The retained entries, oldest first, with pending ones' start times filled in.
  std::vector<Entry> entries() const;
  std::vector<Group> groups() const;
  // The record as one JSON object (format in docs/flight_recorder.md).
  std::string dump_json(const std::string& reason) const;

  // This process's global rank, for dumps (set by init_process_group).
  void set_rank(int rank);
  // Writes dump_json to TRAINRUN_FR_DUMP_DIR/rank<R>.json (through a
  // temporary file and a rename, so readers never see half a dump). Returns
  // the path, or "" when no directory is set or the write failed.
  std::string dump_to_dir(const std::string& reason) const;

  // Watches `store` for dump requests from other ranks (a poll every
  // `interval`) and answers each with dump_to_dir; a later call replaces the
  // store, a null store stops watching. Only when TRAINRUN_FR_DUMP_DIR is set.
  void watch(std::shared_ptr<Store> store, std::chrono::milliseconds interval = std::chrono::milliseconds(200));
  // A collective failed here: dumps this rank's record and asks every rank
  // watching the job's store to dump theirs. Never throws.
  void dump_everywhere(const std::string& reason);

 private:
  void watch_loop();
  void stop_watching();
  std::atomic<int64_t> handled_requests_{0};  // the dump requests this process has answered

  // Held for a few stores per operation: a spin lock costs less than a mutex there.
  class SpinLock {
   public:
    void lock() {
      while (locked_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    }
    void unlock() { locked_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> locked_{false};
  };

  const size_t capacity_;
  mutable SpinLock mu_;
  // Entry id i lives at ring_[(i - 1) % capacity_], its call (formatted by entries()) at calls_[same].
  std::vector<Entry> ring_;
  std::vector<CollectiveCall> calls_;
  uint64_t next_id_ = 1;
  std::vector<Group> groups_;
  int rank_ = -1;

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::shared_ptr<Store> watch_store_;
  std::chrono::milliseconds watch_interval_{200};
  bool watch_stopping_ = false;
  std::thread watcher_;
};

}  // namespace c10d
}  // namespace trainrun
