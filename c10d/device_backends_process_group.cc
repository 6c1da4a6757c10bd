#include "c10d/device_backends_process_group.h"

#include <utility>

#include "base/error.h"

namespace trainrun {
namespace c10d {

DeviceBackendsProcessGroup::DeviceBackendsProcessGroup(int rank, int size, std::string name, Milliseconds timeout,
                                                       std::string config,
                                                       std::map<std::string, std::string> device_backends,
                                                       MakeGroup make)
    : ProcessGroup(rank, size, std::move(name), timeout),
      config_(std::move(config)),
      device_backends_(std::move(device_backends)),
      make_(std::move(make)) {}

std::map<std::string, std::string> DeviceBackendsProcessGroup::parse(const std::string& config) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= config.size()) {
    const size_t comma = config.find(',', start);
    const std::string entry = config.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t colon = entry.find(':');
    TR_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < entry.size(), ValueError,
             "init_process_group: backend '{}': '{}' is not device:backend (as in \"cpu:gloo,cuda:nccl\")", config,
             entry);
    const std::string device = entry.substr(0, colon), backend = entry.substr(colon + 1);
    TR_CHECK(device == "cpu" || device == "cuda", ValueError,
             "init_process_group: backend '{}': device '{}' is not cpu or cuda", config, device);
    TR_CHECK(out.emplace(device, backend).second, ValueError,
             "init_process_group: backend '{}' names device '{}' twice", config, device);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

ProcessGroup& DeviceBackendsProcessGroup::group_of(const std::string& device_type, const char* op) {
  std::lock_guard<std::mutex> lock(mu_);
  auto made = groups_.find(device_type);
  if (made != groups_.end()) return *made->second;
  auto backend = device_backends_.find(device_type);
  TR_CHECK(backend != device_backends_.end(), ValueError,
           "{} on group '{}': no backend for {} tensors (the group's backends: {})", op, name(), device_type,
           config_);
  return *groups_.emplace(device_type, make_(backend->second, device_type)).first->second;
}

ProcessGroup& DeviceBackendsProcessGroup::on(const Device& device, const char* op) {
  return group_of(device.is_cuda() ? "cuda" : "cpu", op);
}

namespace {
const Tensor& first(const std::vector<Tensor>& tensors, const char* op) {
  TR_CHECK(!tensors.empty(), ValueError, "{}: no tensors given", op);
  return tensors.front();
}
}  // namespace

std::shared_ptr<Work> DeviceBackendsProcessGroup::allreduce(Tensor& tensor, ReduceOp op) {
  return on(tensor.device(), "allreduce").allreduce(tensor, op);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::allreduce_coalesced(std::vector<Tensor>& tensors, ReduceOp op) {
  return on(first(tensors, "allreduce_coalesced").device(), "allreduce_coalesced").allreduce_coalesced(tensors, op);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::broadcast(Tensor& tensor, int root) {
  return on(tensor.device(), "broadcast").broadcast(tensor, root);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::reduce(Tensor& tensor, int root, ReduceOp op) {
  return on(tensor.device(), "reduce").reduce(tensor, root, op);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::allgather(std::vector<Tensor>& outputs, const Tensor& input) {
  return on(input.device(), "allgather").allgather(outputs, input);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  return on(input.device(), "all_gather_into_tensor").all_gather_into_tensor(output, input);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::reduce_scatter(Tensor& output, std::vector<Tensor>& inputs,
                                                                 ReduceOp op) {
  return on(output.device(), "reduce_scatter").reduce_scatter(output, inputs, op);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                                                        ReduceOp op) {
  return on(input.device(), "reduce_scatter_tensor").reduce_scatter_tensor(output, input, op);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::alltoall_base(Tensor& output, const Tensor& input,
                                                                const IntList& output_splits,
                                                                const IntList& input_splits) {
  return on(input.device(), "alltoall_base").alltoall_base(output, input, output_splits, input_splits);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs) {
  return on(first(inputs, "alltoall").device(), "alltoall").alltoall(outputs, inputs);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  return on(input.device(), "gather").gather(outputs, input, root);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::scatter(Tensor& output, std::vector<Tensor>& inputs, int root) {
  return on(output.device(), "scatter").scatter(output, inputs, root);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::barrier() {
  return group_of(device_backends_.count("cpu") ? "cpu" : device_backends_.begin()->first, "barrier").barrier();
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::allgather_into_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                                  std::vector<Tensor>& inputs) {
  const char* op = "allgather_into_tensor_coalesced";
  return on(first(inputs, op).device(), op).allgather_into_tensor_coalesced(outputs, inputs);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::reduce_scatter_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                                  std::vector<Tensor>& inputs,
                                                                                  ReduceOp op) {
  const char* what = "reduce_scatter_tensor_coalesced";
  return on(first(inputs, what).device(), what).reduce_scatter_tensor_coalesced(outputs, inputs, op);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  return on(tensor.device(), "send").send(tensor, dst, tag);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::recv(Tensor& tensor, int src, int tag) {
  return on(tensor.device(), "recv").recv(tensor, src, tag);
}
std::shared_ptr<Work> DeviceBackendsProcessGroup::recv_anysource(Tensor& tensor, int tag) {
  return on(tensor.device(), "recv_anysource").recv_anysource(tensor, tag);
}
std::vector<std::shared_ptr<Work>> DeviceBackendsProcessGroup::batch_isend_irecv(std::vector<P2POp>& ops) {
  TR_CHECK(!ops.empty(), ValueError, "batch_isend_irecv: no operations given");
  for (const P2POp& o : ops)
    TR_CHECK(o.tensor.device().is_cuda() == ops.front().tensor.device().is_cuda(), ValueError,
             "batch_isend_irecv on group '{}' ({}): the operations' tensors are on {} and {}; one batch goes to one "
             "backend", name(), config_, ops.front().tensor.device().str(), o.tensor.device().str());
  return on(ops.front().tensor.device(), "batch_isend_irecv").batch_isend_irecv(ops);
}

}  // namespace c10d
}  // namespace trainrun
