#include "c10d/process_group.h"

#include "base/error.h"
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/indexing.h"
#include "tensor/views.h"

namespace trainrun {
namespace c10d {

void ProcessGroup::check_rank(int r, const char* op, const char* what) const {
  TR_CHECK(r >= 0 && r < size_, ValueError, "{} on group '{}': {} {} is not a rank of this group of size {}", op, name_,
           what, r, size_);
}

void ProcessGroup::set_global_ranks(std::vector<int> ranks) {
  TR_CHECK(static_cast<int>(ranks.size()) == size_, ValueError,
           "group '{}' has {} members but {} global ranks were given", name_, size_, ranks.size());
  global_ranks_ = std::move(ranks);
}

std::vector<std::shared_ptr<Work>> ProcessGroup::batch_isend_irecv(std::vector<P2POp>& ops) {
  std::vector<std::shared_ptr<Work>> works;
  works.reserve(ops.size());
  for (P2POp& op : ops)
    works.push_back(op.kind == P2POp::SEND ? send(op.tensor, op.peer, op.tag) : recv(op.tensor, op.peer, op.tag));
  return works;
}

void check_coalesced(const ProcessGroup& pg, const char* op, const std::vector<Tensor>& outputs,
                     const std::vector<Tensor>& inputs, int64_t outputs_per_input, int64_t inputs_per_output) {
  TR_CHECK(!inputs.empty() && outputs.size() == inputs.size(), ValueError,
           "{} on group '{}': give as many outputs as inputs (at least one), got {} and {}", op, pg.name(),
           outputs.size(), inputs.size());
  const Tensor& first = inputs[0];
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Tensor* t : {&inputs[i], &outputs[i]}) {
      TR_CHECK(t->dtype() == first.dtype() && t->device() == first.device(), ValueError,
               "{} on group '{}': tensor {} is {} on {} but the first input is {} on {}", op, pg.name(), i,
               dtype_name(t->dtype()), t->device().str(), dtype_name(first.dtype()), first.device().str());
      TR_CHECK(t->is_contiguous(), ValueError, "{} on group '{}': tensor {} {} is not contiguous", op, pg.name(), i,
               t->shape_str());
    }
    TR_CHECK(outputs[i].numel() * inputs_per_output == inputs[i].numel() * outputs_per_input, ValueError,
             "{} on group '{}': output {} is {} but input {} is {} (the group has {} ranks)", op, pg.name(), i,
             outputs[i].shape_str(), i, inputs[i].shape_str(), pg.size());
  }
}

std::shared_ptr<Work> ProcessGroup::allgather_into_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                    std::vector<Tensor>& inputs) {
  check_coalesced(*this, "allgather_into_tensor_coalesced", outputs, inputs, size_, 1);
  // Packing and unpacking are communication, not computation: no graph.
  ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
  std::vector<Tensor> flat;
  std::vector<int64_t> numels;
  for (const Tensor& t : inputs) {
    flat.push_back(reshape(t, {-1}));
    numels.push_back(t.numel());
  }
  Tensor packed = cat(flat, 0);
  const int64_t total = packed.numel();
  Tensor gathered = empty({size_ * total}, TensorOptions(packed.dtype(), packed.device()));
  auto work = all_gather_into_tensor(gathered, packed);
  // Row r of `gathered` is rank r's packed inputs: columns [offset, offset + n) are its inputs[i].
  return work->then([outputs, numels, gathered, total, world = size_](Work&) mutable {
    ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
    Tensor rows = view(gathered, {world, total});
    int64_t offset = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensor out = view(outputs[i], {world, numels[i]});
      copy_(out, narrow(rows, 1, offset, numels[i]));
      offset += numels[i];
    }
    // Free the staging buffer before waiters wake up (the callback itself is destroyed later, on the
    // backend's thread): memory is back when wait() returns.
    gathered = Tensor();
    rows = Tensor();
  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                    std::vector<Tensor>& inputs, ReduceOp op) {
  check_coalesced(*this, "reduce_scatter_tensor_coalesced", outputs, inputs, 1, size_);
  ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
  // Chunk r of the packed input is every inputs[i]'s chunk r, side by side.
  std::vector<Tensor> columns;
  std::vector<int64_t> numels;
  for (size_t i = 0; i < inputs.size(); ++i) {
    columns.push_back(view(inputs[i], {size_, outputs[i].numel()}));
    numels.push_back(outputs[i].numel());
  }
  Tensor packed = reshape(cat(columns, 1), {-1});
  Tensor reduced = empty({packed.numel() / size_}, TensorOptions(packed.dtype(), packed.device()));
  auto work = reduce_scatter_tensor(reduced, packed, op);
  return work->then([outputs, numels, reduced](Work&) mutable {
    ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
    int64_t offset = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensor out = view(outputs[i], {-1});
      copy_(out, narrow(reduced, 0, offset, numels[i]));
      offset += numels[i];
    }
    reduced = Tensor();  // freed before waiters wake up
  });
}

}  // namespace c10d
}  // namespace trainrun
