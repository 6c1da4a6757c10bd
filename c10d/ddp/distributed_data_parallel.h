#pragma once
// DistributedDataParallel: wraps a module so that after backward every rank
// holds the gradients averaged over all ranks (reducer.h), as PyTorch's DDP
// does. At construction the ranks check that their models agree and take
// rank 0's parameters and buffers. The wrapped module is child "module", so
// state_dict keys read "module.0.weight" as in PyTorch.
#include <memory>

#include "c10d/ddp/reducer.h"
#include "nn/module.h"

namespace trainrun {
namespace c10d {

struct DDPOptions : ReducerOptions {
  bool broadcast_buffers = true;  // rank 0's buffers (BatchNorm statistics) before each forward
};

class DistributedDataParallel : public nn::Module {
 public:
  // group: null for the default group.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group = nullptr,
                          DDPOptions options = {});
  // Broadcasts rank 0's buffers (when training), then runs the module on every argument.
  nn::TensorList forward(const nn::TensorList& inputs) override;
  using nn::Module::forward;

  nn::Module& module() { return *module_; }
  void register_comm_hook(CommHook hook) { reducer_->register_comm_hook(std::move(hook)); }
  Reducer& reducer() { return *reducer_; }

  // Gradient accumulation: backward passes inside it only accumulate locally;
  // the next one outside synchronises everything accumulated.
  class NoSync {
   public:
    explicit NoSync(Reducer& r) : r_(r), saved_(r.sync()) { r_.set_sync(false); }
    ~NoSync() { r_.set_sync(saved_); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    Reducer& r_;
    bool saved_;
  };
  NoSync no_sync() { return NoSync(*reducer_); }

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DDPOptions options_;
  std::shared_ptr<Reducer> reducer_;
};

// Built-in communication hooks: the bucket travels as float16 / bfloat16
// (half the bytes), is averaged, and comes back in its own dtype.
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

}  // namespace c10d
}  // namespace trainrun
