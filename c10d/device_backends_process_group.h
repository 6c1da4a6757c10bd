#pragma once
// A group whose collectives go to a backend chosen by the tensors' device, as
// PyTorch's init_process_group(backend="cpu:gloo,cuda:nccl"): CPU tensors to
// one backend's group, CUDA tensors to another's, over the same ranks. Each
// device's group is made at the first collective on that device (every rank
// issues it, so they meet in the store under the device's own prefix), as
// PyTorch makes NCCL communicators lazily: a program that never touches CUDA
// tensors never starts NCCL, and a machine without GPUs can run the same
// script. barrier() is the CPU backend's when there is one.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "c10d/process_group.h"

namespace trainrun {
namespace c10d {

class DeviceBackendsProcessGroup final : public ProcessGroup {
 public:
  // Makes the group of one backend for this group's ranks (its store already prefixed for the device).
  using MakeGroup = std::function<std::shared_ptr<ProcessGroup>(const std::string& backend, const std::string& device)>;

  // device_backends: device type ("cpu", "cuda") -> backend name, parsed from config ("cpu:gloo,cuda:nccl").
  DeviceBackendsProcessGroup(int rank, int size, std::string name, Milliseconds timeout, std::string config,
                             std::map<std::string, std::string> device_backends, MakeGroup make);

  // "cpu:gloo,cuda:nccl" -> {cpu: gloo, cuda: nccl}; throws ValueError naming a malformed or repeated entry.
  static std::map<std::string, std::string> parse(const std::string& config);

  std::string backend_name() const override { return config_; }

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
  // The group for tensors on `device` (made at first use); ValueError naming the op when no backend takes them.
  ProcessGroup& on(const Device& device, const char* op);
  ProcessGroup& group_of(const std::string& device_type, const char* op);

  std::string config_;
  std::map<std::string, std::string> device_backends_;
  MakeGroup make_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ProcessGroup>> groups_;
};

}  // namespace c10d
}  // namespace trainrun
