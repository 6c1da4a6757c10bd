#pragma once
// The CPU backend: collectives over Gloo's TCP transport, rendezvous through
// a trainrun Store; between ranks of one host, allreduce, allgather,
// reduce_scatter and broadcast go through shared memory (shm/) instead. Collectives run on the group's own worker
// thread in issue order (the caller never blocks); point-to-point sends and receives are posted at once and complete on
// their own (sends and receives on separate threads). Only Gloo's newer API (gloo::allreduce with options, unbound buffers) is used: mixing in the older
// algorithm classes on one context shrinks the socket buffers to the first message's size and slows later transfers by
// 100x. init_process_group and new_group wrap it in ProcessGroupWrapper
// (which ranks were behind when a collective fails; the debug signature check).
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "c10d/process_group.h"
#include "c10d/shm/shm_communicator.h"
#include "store/store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace trainrun {
namespace c10d {

class ProcessGroupGloo final : public ProcessGroup {
 public:
  struct Options {
    Milliseconds timeout{1800000};  // PyTorch's default: 30 minutes
    // The address other ranks reach this one at; empty: GLOO_SOCKET_IFNAME's
    // interface when set, else this host's name when it resolves to an
    // address we can bind, else loopback (as PyTorch chooses).
    std::string hostname;
    // Use shared memory when every rank is on this host (every rank must
    // agree; TRAINRUN_SHM_COLLECTIVES=0 on any rank turns it off for all).
    bool shared_memory = true;
  };

  // Connects to every other rank (blocking until they all arrive, or the
  // store's timeout); `store` should already be prefixed for this group.
  ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size, std::string name, Options options);
  ~ProcessGroupGloo() override;

  std::string backend_name() const override { return "gloo"; }

  std::shared_ptr<Work> allreduce(Tensor& tensor, ReduceOp op = {}) override;
  std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>& tensors, ReduceOp op = {}) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override;
  std::shared_ptr<Work> reduce(Tensor& tensor, int root, ReduceOp op = {}) override;
  std::shared_ptr<Work> allgather(std::vector<Tensor>& outputs, const Tensor& input) override;
  std::shared_ptr<Work> all_gather_into_tensor(Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, std::vector<Tensor>& inputs, ReduceOp op = {}) override;
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = {}) override;
  // Between the ranks of one host, straight between the tensors and shared memory (the default packs the
  // inputs into one buffer and unpacks the result: two more copies of everything).
  std::shared_ptr<Work> allgather_into_tensor_coalesced(std::vector<Tensor>& outputs,
                                                        std::vector<Tensor>& inputs) override;
  std::shared_ptr<Work> reduce_scatter_tensor_coalesced(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs,
                                                        ReduceOp op = {}) override;
  std::shared_ptr<Work> alltoall_base(Tensor& output, const Tensor& input, const IntList& output_splits = {},
                                      const IntList& input_splits = {}) override;
  std::shared_ptr<Work> alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs) override;
  std::shared_ptr<Work> gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  std::shared_ptr<Work> scatter(Tensor& output, std::vector<Tensor>& inputs, int root) override;
  std::shared_ptr<Work> barrier() override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, int tag = 0) override;
  std::shared_ptr<Work> recv_anysource(Tensor& tensor, int tag = 0) override;

 private:
  // Queues fn(tag) for the worker thread; the work fails with a
  // DistBackendError naming the op, its number and the group when fn throws.
  std::shared_ptr<Work> enqueue(const char* op, std::function<void(uint32_t tag)> fn);
  void check_root_list(const std::vector<Tensor>& list, const Tensor& like, int root, const char* op,
                       const char* what) const;
  // Over TCP: work (n chunks of chunk_numel) ends with chunk rank() reduced over every rank.
  void ring_reduce_scatter(Tensor& work, int64_t chunk_numel, const ReduceFn& fn, uint32_t tag);
  // out = every rank's in, in rank order (shared memory or Gloo).
  void gather_bytes(const Tensor& in, const Tensor& out, uint32_t tag);
  void worker_loop();
  std::shared_ptr<Work> post_p2p(const char* op, Tensor tensor, std::vector<int> peers, int tag, bool is_send);
  void p2p_loop(bool sends);
  // Destruction: wakes the p2p thread out of every pending wait.
  void abort_pending_p2p();
  // The shared reduction of allreduce, reduce and reduce_scatter_tensor:
  // reduces `buffer` (contiguous) in place, to every rank or to root only.
  void reduce_in_place(Tensor& buffer, ReduceOp op, uint32_t tag, int root);

  std::shared_ptr<Store> store_;
  // Set when every rank is on this host: allreduce, allgather,
  // reduce_scatter and broadcast go through shared memory instead of TCP.
  std::unique_ptr<ShmCommunicator> shm_;
  std::shared_ptr<gloo::transport::Device> device_;
  int forced_allreduce_algorithm_ = 0;  // 0: by size; 1: ring; 2: bcube (TRAINRUN_GLOO_ALLREDUCE)
  std::shared_ptr<gloo::Context> context_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  uint32_t next_seq_ = 0;
  struct Item {
    std::shared_ptr<Work> work;
    std::function<void(uint32_t)> fn;
    uint32_t tag;
  };
  std::deque<Item> queue_;
  // The error a failed collective finishes with: its description and what went wrong.
  std::exception_ptr failure(const Item& item, const std::string& what);
  std::thread worker_;

  // Posted point-to-point operations, completed in posting order: receives
  // by p2p_threads_[0], sends by p2p_threads_[1]. Two queues, because a send
  // completes only once the peer has posted its receive: one queue would let
  // a send wait for a peer that is itself waiting for one of our receives to
  // complete (two pipeline stages exchanging activations and gradients).
  struct PendingP2P;
  std::mutex p2p_mu_;
  std::condition_variable p2p_cv_[2];
  std::deque<std::shared_ptr<PendingP2P>> p2p_queue_[2];
  std::thread p2p_threads_[2];
};

}  // namespace c10d
}  // namespace trainrun
