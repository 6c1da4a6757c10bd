#pragma once
// torch.distributed's ProcessGroup: the collectives every distributed layer
// uses, between the `size()` ranks of one group. Every call returns a Work at
// once; the backend (gloo/ for CPU tensors, later nccl/) runs it in issue
// order. All ranks of the group must issue the same collectives in the same
// order with matching shapes and dtypes.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/time.h"
#include "c10d/reduce_op.h"
#include "c10d/work.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace c10d {

// One entry of batch_isend_irecv.
struct P2POp {
  enum Kind { SEND, RECV } kind;
  Tensor tensor;
  int peer;
  int tag = 0;
};

class ProcessGroup {
  static std::vector<int> identity_ranks(int size) {
    std::vector<int> r(size > 0 ? size : 0);
    for (int i = 0; i < size; ++i) r[i] = i;
    return r;
  }

 public:
  ProcessGroup(int rank, int size, std::string name, Milliseconds timeout)
      : rank_(rank), size_(size), global_ranks_(identity_ranks(size)), name_(std::move(name)), timeout_(timeout) {}
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The default group's rank of each member, in group-rank order (identity
  // for the default group): what get_process_group_ranks reports and DTensor's
  // meshes are built from.
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  void set_global_ranks(std::vector<int> ranks);
  const std::string& name() const { return name_; }
  Milliseconds timeout() const { return timeout_; }
  virtual std::string backend_name() const = 0;

  // In place on every rank.
  virtual std::shared_ptr<Work> allreduce(Tensor& tensor, ReduceOp op = {}) = 0;
  // Several tensors in one collective (each keeps its shape).
  virtual std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>& tensors, ReduceOp op = {}) = 0;
  virtual std::shared_ptr<Work> broadcast(Tensor& tensor, int root) = 0;
  // The result lands in `tensor` on root only.
  virtual std::shared_ptr<Work> reduce(Tensor& tensor, int root, ReduceOp op = {}) = 0;
  // outputs[r] receives rank r's input (size() tensors shaped like input).
  virtual std::shared_ptr<Work> allgather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // output: size() inputs stacked along dim 0 (or concatenated when flat).
  virtual std::shared_ptr<Work> all_gather_into_tensor(Tensor& output, const Tensor& input) = 0;
  // output = op over ranks of inputs[rank()] (inputs: size() tensors shaped like output).
  virtual std::shared_ptr<Work> reduce_scatter(Tensor& output, std::vector<Tensor>& inputs, ReduceOp op = {}) = 0;
  // input: size() chunks of output's numel along dim 0.
  virtual std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = {}) = 0;
  // Rows of input go out in chunks (input_splits[r] rows to rank r; empty:
  // equal chunks); output receives output_splits[r] rows from rank r.
  virtual std::shared_ptr<Work> alltoall_base(Tensor& output, const Tensor& input, const IntList& output_splits = {},
                                              const IntList& input_splits = {}) = 0;
  // inputs[r] goes to rank r; outputs[r] comes from rank r (any sizes).
  virtual std::shared_ptr<Work> alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs) = 0;
  // outputs (root only, size() tensors) receive every rank's input.
  virtual std::shared_ptr<Work> gather(std::vector<Tensor>& outputs, const Tensor& input, int root) = 0;
  // output receives inputs[rank()] from root (inputs given on root only).
  virtual std::shared_ptr<Work> scatter(Tensor& output, std::vector<Tensor>& inputs, int root) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;

  // Several all_gather_into_tensor in one collective: outputs[i] receives
  // every rank's inputs[i] (size() * inputs[i].numel() elements, contiguous).
  // The default packs the inputs into one buffer, gathers it once and
  // unpacks; all tensors share one dtype and device.
  virtual std::shared_ptr<Work> allgather_into_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                std::vector<Tensor>& inputs);
  // Several reduce_scatter_tensor in one collective: outputs[i] = op over
  // ranks of chunk rank() of inputs[i] (size() * outputs[i].numel() elements).
  virtual std::shared_ptr<Work> reduce_scatter_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                std::vector<Tensor>& inputs, ReduceOp op = {});

  // Point to point. The tag tells apart messages between the same pair.
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) = 0;
  virtual std::shared_ptr<Work> recv(Tensor& tensor, int src, int tag = 0) = 0;
  // Work::source_rank() says who sent it.
  virtual std::shared_ptr<Work> recv_anysource(Tensor& tensor, int tag = 0) = 0;
  // Posts every op, then returns their works (in the same order).
  virtual std::vector<std::shared_ptr<Work>> batch_isend_irecv(std::vector<P2POp>& ops);

 protected:
  // Throws ValueError naming the op when r is not a rank of this group.
  void check_rank(int r, const char* op, const char* what) const;

  int rank_, size_;
  std::vector<int> global_ranks_;
  std::string name_;
  Milliseconds timeout_;
};

// Checks the arguments of a coalesced collective (the same count of outputs and inputs, one dtype and device,
// contiguous, outputs[i] holding outputs_per_input / inputs_per_output times inputs[i]'s elements); throws a
// ValueError naming the op, the group and the tensor.
void check_coalesced(const ProcessGroup& pg, const char* op, const std::vector<Tensor>& outputs,
                     const std::vector<Tensor>& inputs, int64_t outputs_per_input, int64_t inputs_per_output);

}  // namespace c10d
}  // namespace trainrun
