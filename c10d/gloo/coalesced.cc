// The coalesced all-gather and reduce-scatter (FSDP's one collective per
// parameter group). Between the ranks of one host they go straight between
// the tensors and the shared-memory slots; over TCP, ProcessGroup's default
// packs the inputs into one buffer and unpacks the result.
#include "c10d/gloo/process_group_gloo.h"
#include "c10d/gloo/tensor_buffers.h"
#include "c10d/reduce_op.h"
#include "c10d/shm/shm_communicator.h"
#include "tensor/ops.h"

namespace trainrun {
namespace c10d {

std::shared_ptr<Work> ProcessGroupGloo::allgather_into_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                        std::vector<Tensor>& inputs) {
  if (!shm_) return ProcessGroup::allgather_into_tensor_coalesced(outputs, inputs);
  check_coalesced(*this, "allgather_into_tensor_coalesced", outputs, inputs, size_, 1);
  check_cpu(inputs[0], "allgather_into_tensor_coalesced", name_, "input");
  return enqueue("allgather_into_tensor_coalesced", [this, outputs, inputs](uint32_t) {
    std::vector<const char*> ins;
    std::vector<char*> outs;
    std::vector<size_t> bytes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ins.push_back(bytes_of(inputs[i]));
      outs.push_back(bytes_of(outputs[i]));
      bytes.push_back(static_cast<size_t>(inputs[i].nbytes()));
    }
    shm_->allgather_pieces(ins, outs, bytes);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::reduce_scatter_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                        std::vector<Tensor>& inputs, ReduceOp op) {
  if (!shm_) return ProcessGroup::reduce_scatter_tensor_coalesced(outputs, inputs, op);
  check_coalesced(*this, "reduce_scatter_tensor_coalesced", outputs, inputs, 1, size_);
  check_cpu(inputs[0], "reduce_scatter_tensor_coalesced", name_, "input");
  reduce_function(op, inputs[0].dtype());  // refuses op/dtype mismatches now, on the caller's thread
  return enqueue("reduce_scatter_tensor_coalesced", [this, outputs, inputs, op](uint32_t) mutable {
    std::vector<const char*> ins;
    std::vector<char*> outs;
    std::vector<size_t> numels;
    std::vector<Tensor> scaled;  // PREMUL_SUM: the inputs times the factor, kept alive for the copy
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (op.kind == ReduceOp::PREMUL_SUM) scaled.push_back(mul(inputs[i], op.factor));
      ins.push_back(bytes_of(op.kind == ReduceOp::PREMUL_SUM ? scaled.back() : inputs[i]));
      outs.push_back(bytes_of(outputs[i]));
      numels.push_back(static_cast<size_t>(outputs[i].numel()));
    }
    shm_->reduce_scatter_pieces(ins, outs, numels, outputs[0].element_size(), reduce_function(op, outputs[0].dtype()));
    if (op.kind == ReduceOp::AVG)
      for (Tensor& out : outputs) finish_average(out, size_);
  });
}

}  // namespace c10d
}  // namespace trainrun
