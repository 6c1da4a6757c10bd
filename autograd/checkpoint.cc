#include "autograd/checkpoint.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

class CheckpointBackward final : public Node {
 public:
  CheckpointBackward(CheckpointFunction fn, TensorList inputs, bool restore_rng, Generator::Snapshot rng)
      : fn_(std::move(fn)), inputs_(std::move(inputs)), restore_rng_(restore_rng), rng_(std::move(rng)) {}
  std::string name() const override { return "CheckpointBackward"; }
  void release_variables() override {
    inputs_.clear();
    released_ = true;
  }

  TensorList apply(TensorList&& grad_outputs) override {
    TR_CHECK(!released_, Error,
             "CheckpointBackward: trying to backward through a checkpoint a second time; pass retain_graph=true");
    // Recompute with the generator where the forward found it, then put it back.
    Generator& gen = default_generator();
    const Generator::Snapshot now = restore_rng_ ? gen.snapshot() : Generator::Snapshot{};
    if (restore_rng_) gen.restore(rng_);
    TensorList detached, wanted;
    std::vector<size_t> wanted_index;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      Tensor d = detach(inputs_[i]);
      if (inputs_[i].defined() && requires_grad(inputs_[i])) {
        set_requires_grad(d);
        wanted.push_back(d);
        wanted_index.push_back(i);
      }
      detached.push_back(d);
    }
    TensorList outputs;
    {
      EnableGradGuard enable;
      outputs = fn_(detached);
    }
    if (restore_rng_) gen.restore(now);
    TensorList roots, grads;
    for (size_t i = 0; i < outputs.size() && i < grad_outputs.size(); ++i) {
      if (!grad_outputs[i].defined() || !requires_grad(outputs[i])) continue;
      roots.push_back(outputs[i]);
      grads.push_back(grad_outputs[i]);
    }
    TensorList result(inputs_.size());
    if (roots.empty() || wanted.empty()) return result;
    TensorList g = autograd::grad(roots, wanted, grads, false, GradMode::is_enabled(), /*allow_unused=*/true);
    for (size_t k = 0; k < wanted_index.size(); ++k) result[wanted_index[k]] = g[k];
    return result;
  }

 private:
  CheckpointFunction fn_;
  TensorList inputs_;
  bool restore_rng_;
  Generator::Snapshot rng_;
  bool released_ = false;
};

}  // namespace

TensorList checkpoint(const CheckpointFunction& fn, const TensorList& inputs, bool preserve_rng_state) {
  bool needs = false;
  for (const Tensor& t : inputs) needs = needs || (t.defined() && requires_grad(t));
  if (!GradMode::is_enabled() || !needs) return fn(inputs);
  Generator::Snapshot rng = preserve_rng_state ? default_generator().snapshot() : Generator::Snapshot{};
  TensorList outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  auto node = std::make_shared<CheckpointBackward>(fn, inputs, preserve_rng_state, std::move(rng));
  std::vector<Edge> edges;
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  node->set_next_edges(std::move(edges));
  node->set_num_inputs(static_cast<uint32_t>(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !is_floating(outputs[i].dtype())) continue;
    outputs[i] = detach(outputs[i]);  // a fresh handle: fn may have returned an input itself
    set_history(outputs[i], node, static_cast<uint32_t>(i));
  }
  return outputs;
}

}  // namespace trainrun
