#pragma once
// The broker of tensors shared between the processes of one node: the agent
// hosts it (trainrun.multiprocessing hosts one in the parent when there is no
// agent), and every worker that shares device memory talks to it.
//
// Memory from CPU shared-memory files needs no broker (the kernel frees a
// memfd when its last holder is gone). Device memory does: a block another
// process has opened must stay out of its owner's pool until that process is
// done, whether it says so or dies. The broker keeps the books:
//  - an *export* is a block of memory its owner shares (id, bytes, device);
//  - a *lease* is one consumer's hold on an export. The owner takes it when
//    it sends the handle (so the block is held before the consumer can even
//    see it), the consumer claims it when it opens the handle, and releases
//    it when its tensor dies. A consumer that dies has its leases released
//    by the broker; a lease never claimed stays with its owner.
//  - when a lease goes, the broker tells the owner, which gives back that
//    lease's hold on the block: with the last, its allocator may reuse it.
// The leak report names what would have leaked: each process that exited
// still holding another's memory, or leaving a lease it sent never opened,
// and what is leased now (owner, holder, size and age of each lease).
//
// Wire: a Unix-domain SOCK_SEQPACKET socket, one JSON object per message.
//   hello   {"op":"hello","rank":R,"pid":P}
//   export  {"op":"export","id":ID,"bytes":N,"device":"cuda:0"}
//   lease   {"op":"lease","id":ID,"lease":L}            (the owner, at send time)
//   claim   {"op":"claim","lease":L}                    (the consumer, at open time)
//   release {"op":"release","lease":L}
//   unexport{"op":"unexport","id":ID}                   (the owner freed it)
//   report  {"op":"report"}  -> {"op":"report","exports":[...],"leases":[...]}
// and to the owner, for each lease released: {"op":"released","id":ID,"lease":L,"leases":left}.
// A malformed message is answered {"op":"error","message":...}; the
// connection stays up.
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace trainrun {

// One outstanding lease, for reports.
struct IpcLeaseInfo {
  std::string lease, export_id, device;
  int64_t bytes = 0;
  int owner_rank = -1, holder_rank = -1;  // holder -1: not claimed yet (still in flight)
  int64_t owner_pid = 0, holder_pid = 0;
  double age_s = 0;
};

// Totals over the broker's life and now, for the agent's summary and tests.
struct IpcBrokerStats {
  int64_t exports_live = 0, leases_live = 0;
  int64_t exports_total = 0, leases_total = 0;
  int64_t leases_released_by_death = 0;  // released because their holder exited
  int64_t clients_connected = 0;
};

class IpcBroker {
 public:
  // Listens on `socket_path` (removed first if a stale one is there) and
  // serves on a thread of its own until destroyed.
  explicit IpcBroker(std::string socket_path);
  ~IpcBroker();
  IpcBroker(const IpcBroker&) = delete;
  IpcBroker& operator=(const IpcBroker&) = delete;

  const std::string& socket_path() const { return path_; }
  std::vector<IpcLeaseInfo> outstanding_leases() const;
  IpcBrokerStats stats() const;
  // The leak report: a line per outstanding lease and per lease a process
  // left behind at its exit; "" when there is nothing to report.
  std::string leak_report() const;

 private:
  struct Client {
    int rank = -1;
    int64_t pid = 0;
  };
  struct Export {
    int owner_fd = -1;  // -1 once the owner is gone
    int owner_rank = -1;
    int64_t owner_pid = 0;
    int64_t bytes = 0;
    std::string device;
    int leases = 0;
    bool unexported = false;  // the owner freed it: forgotten when its last lease goes
  };
  struct Lease {
    std::string export_id;
    int holder_fd = -1;  // -1 until claimed
    int holder_rank = -1;
    int64_t holder_pid = 0;
    std::chrono::steady_clock::time_point taken;
  };

  void serve();
  void accept_client();
  // Handles one message of `fd`; returns false when the connection is over.
  bool handle(int fd);
  std::string dispatch(int fd, const std::string& message);  // the reply, "" for none
  void drop_client(int fd);
  void release_lease(const std::string& lease);  // with mu_ held
  void send_to(int fd, const std::string& message);

  std::string path_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: the destructor's signal to stop
  mutable std::mutex mu_;
  std::map<int, Client> clients_;
  std::map<std::string, Export> exports_;
  std::map<std::string, Lease> leases_;
  IpcBrokerStats stats_;
  std::vector<std::string> exit_notes_;  // leases processes left behind at exit (the first 100)
  int64_t exit_notes_dropped_ = 0;
  std::thread thread_;
};

}  // namespace trainrun
