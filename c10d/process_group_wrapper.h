#pragma once
// What every backend gets from init_process_group and new_group: the
// backend's group, wrapped so that a failure says which ranks were behind
// and, in debug mode, mismatched collectives are caught before they run.
//
// - Laggard report: the wrapper numbers the group's collectives (#1, #2, ...)
//   and publishes the latest one each rank has entered (CollectiveProgress).
//   When a backend's work fails, its error gains "ranks that had not entered
//   #4: 2 (last at #3), 3 (none yet)": a dead or stuck rank is named, not
//   guessed. Costs an atomic store per collective.
// - Signature check (TRAINRUN_DISTRIBUTED_DEBUG=DETAIL, PyTorch's
//   ProcessGroupWrapper): before each collective, every rank's description
//   of it ("allreduce(float32 [4], SUM)") is exchanged through the group's
//   store, and a mismatch throws DistBackendError naming both sides instead
//   of hanging or reducing garbage. Costs a few store round trips per call.
//
// - Flight recorder: every collective and point-to-point operation goes into
//   the process's FlightRecorder (flight_recorder.h); a failed or timed-out
//   collective dumps it on every rank.
//
// Point-to-point operations are recorded, not checked (they need not match).
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "c10d/collective_call.h"
#include "c10d/collective_progress.h"
#include "c10d/process_group.h"
#include "store/store.h"

namespace trainrun {
namespace c10d {

class ProcessGroupWrapper final : public ProcessGroup {
 public:
  // `store` is the group's own (prefixed) store, the one the backend rendezvoused through.
  ProcessGroupWrapper(std::shared_ptr<ProcessGroup> backend, std::shared_ptr<Store> store, bool check_signatures);
  ~ProcessGroupWrapper() override;

  // True when TRAINRUN_DISTRIBUTED_DEBUG=DETAIL.
  static bool detail_debug_from_env();

  const std::shared_ptr<ProcessGroup>& backend() const { return backend_; }
  std::string backend_name() const override { return backend_->backend_name(); }

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
  std::shared_ptr<Work> allgather_into_tensor_coalesced(std::vector<Tensor>& outputs,
                                                        std::vector<Tensor>& inputs) override;
  std::shared_ptr<Work> reduce_scatter_tensor_coalesced(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs,
                                                        ReduceOp op = {}) override;

  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, int tag = 0) override;
  std::shared_ptr<Work> recv_anysource(Tensor& tensor, int tag = 0) override;
  std::vector<std::shared_ptr<Work>> batch_isend_irecv(std::vector<P2POp>& ops) override;

 private:
  // Numbers the collective, checks its signature (debug mode), runs `call`
  // on the backend, records it, and returns a work whose failure names the laggards.
  std::shared_ptr<Work> collective(CollectiveCall what, const std::function<std::shared_ptr<Work>()>& call);
  // Records a point-to-point work in the flight recorder; returns it.
  std::shared_ptr<Work> recorded_p2p(CollectiveCall what, std::shared_ptr<Work> work);
  // This group's index in the flight recorder (registered at its first operation, when its ranks are final).
  int recorder_group();
  // Debug mode: every rank's signature of collective `seq`, through the store.
  void check_signature(uint32_t seq, const std::string& signature);
  // The backend's failure of collective `seq`, with the laggard report
  // appended (DistBackendError and TimeoutError; other errors unchanged).
  static std::exception_ptr explain(std::exception_ptr error, uint32_t seq, CollectiveProgress& progress,
                                    Milliseconds timeout);

  std::shared_ptr<ProcessGroup> backend_;
  std::shared_ptr<Store> store_;
  bool check_signatures_;
  std::atomic<uint32_t> next_seq_{0};
  std::atomic<uint32_t> next_p2p_seq_{0};
  std::atomic<int> recorder_group_{-1};
  std::shared_ptr<CollectiveProgress> progress_;
  // Set while the wrapper is destroyed: the backend then fails its pending
  // works, which are not laggard cases.
  std::shared_ptr<std::atomic<bool>> closing_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace c10d
}  // namespace trainrun
