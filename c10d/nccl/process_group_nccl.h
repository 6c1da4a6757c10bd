#pragma once
// The GPU backend: the ProcessGroup API over NCCL for CUDA tensors.
//  - Communicators are created lazily, one per device a rank uses, with the
//    unique id passed through the group's store; creation has the group's
//    timeout and names the ranks' count when they do not all join.
//  - Collectives run on a dedicated NCCL stream per device, ordered after the
//    caller's current stream with an event, so the CPU never blocks; their
//    tensors are marked used on that stream for the caching allocator.
//  - A watchdog thread completes works as their events fire. A collective
//    still running after the timeout aborts the group's communicators and
//    fails every pending work with an error naming the op and its number.
//    NCCL has no tags and no receive-from-any-source: tags are ignored (as in
//    PyTorch) and recv_anysource throws.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "c10d/nccl/work_nccl.h"
#include "c10d/process_group.h"
#include "store/store.h"
#include "tensor/cuda/stream.h"

struct ncclComm;

namespace trainrun {
namespace c10d {

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  struct Options {
    Milliseconds timeout{600000};  // PyTorch's NCCL default: 10 minutes
    // Work.wait() blocks the CPU until the collective ends (or times out);
    // TRAINRUN_NCCL_BLOCKING_WAIT=1 sets it.
    bool blocking_wait = false;
    bool high_priority_stream = false;
  };

  // `store` should already be prefixed for this group. Nothing touches a GPU
  // until the first collective.
  ProcessGroupNCCL(std::shared_ptr<Store> store, int rank, int size, std::string name, Options options);
  ~ProcessGroupNCCL() override;

  std::string backend_name() const override { return "nccl"; }

  std::shared_ptr<Work> allreduce(Tensor& tensor, ReduceOp op = {}) override;
  std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>& tensors, ReduceOp op = {}) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override;
  std::shared_ptr<Work> reduce(Tensor& tensor, int root, ReduceOp op = {}) override;
  std::shared_ptr<Work> allgather(std::vector<Tensor>& outputs, const Tensor& input) override;
  std::shared_ptr<Work> all_gather_into_tensor(Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, std::vector<Tensor>& inputs, ReduceOp op = {}) override;
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = {}) override;
  std::shared_ptr<Work> alltoall_base(Tensor& output, const Tensor& input, const IntList& output_splits = {},
                                      const IntList& input_splits = {}) override;
  std::shared_ptr<Work> alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs) override;
  std::shared_ptr<Work> gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  std::shared_ptr<Work> scatter(Tensor& output, std::vector<Tensor>& inputs, int root) override;
  std::shared_ptr<Work> barrier() override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, int tag = 0) override;
  std::shared_ptr<Work> recv_anysource(Tensor& tensor, int tag = 0) override;
  // All sends and receives in one NCCL group: no order of them can deadlock.
  std::vector<std::shared_ptr<Work>> batch_isend_irecv(std::vector<P2POp>& ops) override;

 private:
  struct DeviceComm {
    ncclComm* comm;
    cuda::Stream stream;
  };
  using Enqueue = std::function<void(ncclComm* comm, CUstream_st* stream)>;

  // The communicator of `device`, created on first use.
  DeviceComm& comm_for(int device);
  // Validates tensors (CUDA, one device, dense), then runs enqueue on the
  // NCCL stream and returns the work that completes with it.
  std::shared_ptr<Work> run(const char* op, const std::vector<Tensor>& tensors, const Enqueue& enqueue,
                            bool cpu_wait = false);
  // Waits (within the timeout) until an NCCL call on a non-blocking
  // communicator has been enqueued; throws naming `what` when it failed.
  void enqueued(ncclComm* comm, int result, const std::string& what);
  void watchdog_loop();
  // Aborts every communicator and fails every pending work with `reason`.
  void abort_group(const std::string& reason);

  std::shared_ptr<Store> store_;
  Options options_;
  std::mutex comms_mu_;
  std::map<int, DeviceComm> comms_;
  int comms_created_ = 0;

  std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::deque<std::shared_ptr<WorkNCCL>> pending_;
  std::string aborted_;  // why the communicators were aborted ("" while healthy)
  uint64_t next_seq_ = 0;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace c10d
}  // namespace trainrun
