#include "c10d/ddp/distributed_data_parallel.h"

#include <functional>

#include "autograd/grad_mode.h"
#include "c10d/distributed.h"
#include "tensor/ops.h"

namespace trainrun {
namespace c10d {
namespace {

// Every rank's (parameter count, hash of names, shapes and dtypes); throws
// naming the first rank whose model differs from rank 0's.
void check_models_agree(ProcessGroup& group, const nn::Module& m) {
  std::string signature;
  int64_t count = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    signature += fmt::format("{}:{}:{};", name, p.shape_str(), dtype_name(p.dtype()));
    ++count;
  }
  const int64_t hash = static_cast<int64_t>(std::hash<std::string>()(signature) & 0x7fffffffffffffffULL);
  // On the parameters' device: NCCL groups take CUDA tensors only.
  const auto params = m.parameters();
  const Device device = params.empty() ? Device() : params.front().device();
  Tensor mine = tensor<int64_t>({count, hash}, {2}).to(device);
  Tensor all = empty({group.size() * 2}, TensorOptions(DType::Int64, device));
  group.all_gather_into_tensor(all, mine)->wait();
  all = all.cpu();
  for (int r = 0; r < group.size(); ++r) {
    const int64_t c = all.select(0, 2 * r).item<int64_t>(), h = all.select(0, 2 * r + 1).item<int64_t>();
    const int64_t c0 = all.select(0, 0).item<int64_t>(), h0 = all.select(0, 1).item<int64_t>();
    TR_CHECK(c == c0 && h == h0, ValueError,
             "DistributedDataParallel: rank {}'s model differs from rank 0's ({} parameters vs {}{}); every rank "
             "must build the same model",
             r, c, c0, c == c0 ? ", same count but different names, shapes or dtypes" : "");
  }
}

CommHook compress_hook(DType wire) {
  return [wire](ProcessGroup& group, Tensor& bucket) -> std::shared_ptr<Work> {
    auto compressed = std::make_shared<Tensor>(bucket.to(wire));
    Tensor target = bucket;
    return group.allreduce(*compressed, ReduceOp::AVG)->then([compressed, target](Work&) {
      Tensor t = target;
      copy_(t, *compressed);
    });
  };
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group, DDPOptions options)
    : nn::Module("DistributedDataParallel"),
      module_(std::move(module)),
      group_(group ? std::move(group) : default_group()),
      options_(options) {
  TR_CHECK(module_ != nullptr, ValueError, "DistributedDataParallel: no module given");
  register_module("module", module_);
  check_models_agree(*group_, *module_);
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : module_->named_parameters()) {
      Tensor t = p;
      group_->broadcast(t, 0)->wait();
    }
    for (auto& [name, b] : module_->named_buffers()) {
      Tensor t = b;
      group_->broadcast(t, 0)->wait();
    }
  }
  reducer_ = Reducer::create(module_->named_parameters(), group_, options_);
}

nn::TensorList DistributedDataParallel::forward(const nn::TensorList& inputs) {
  if (options_.broadcast_buffers && is_training()) {
    NoGradGuard no_grad;
    for (auto& [name, b] : module_->named_buffers()) {
      Tensor t = b;
      group_->broadcast(t, 0)->wait();
    }
  }
  return (*module_)(inputs);
}

CommHook fp16_compress_hook() { return compress_hook(DType::Float16); }
CommHook bf16_compress_hook() { return compress_hook(DType::BFloat16); }

}  // namespace c10d
}  // namespace trainrun
