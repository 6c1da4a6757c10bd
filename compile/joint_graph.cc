#include "compile/joint_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/error.h"
#include "compile/dead_code.h"
#include "compile/fusion.h"
#include "compile/gemm_epilogue.h"
#include "compile/recompute.h"
#include "compile/scalar_constants.h"
#include "compile/reshaped_reduction.h"
#include "compile/scatter_sum.h"
#include "tensor/factories.h"
#include "tensor/record_function.h"

namespace trainrun::compile {

// The one node a joint graph's run gives its outputs: its backward is the
// recorded backward program, on the gradients and the saved forward values.
class CompiledBackward : public Node {
 public:
  CompiledBackward(std::vector<Edge> edges, std::shared_ptr<const JointGraph> joint, std::vector<Tensor> saved)
      : Node(std::move(edges)), joint_(std::move(joint)), saved_(std::move(saved)) {
    versions_.reserve(saved_.size());
    for (const Tensor& t : saved_) versions_.push_back(t.defined() ? t.impl()->version() : 0);
  }

  TensorList apply(TensorList&& grads) override {
    TR_CHECK(!GradMode::is_enabled(), ValueError,
             "backward through a trainrun.compile'd call with create_graph=True (double backward) is not supported: "
             "its backward is a recorded program without a graph of its own; call the function uncompiled");
    TR_CHECK(!released_, Error,
             "trying to backward through a trainrun.compile'd call a second time, after its saved tensors were "
             "freed; pass retain_graph=True to the first backward");
    for (size_t i = 0; i < saved_.size(); ++i)
      TR_CHECK(!saved_[i].defined() || saved_[i].impl()->version() == versions_[i], Error,
               "a tensor the backward of a trainrun.compile'd call needs (of shape [{}]) was modified in place after "
               "the call (version {}, saved at {})",
               fmt::join(saved_[i].sizes(), ", "), saved_[i].impl()->version(), versions_[i]);
    const JointGraph& j = *joint_;
    std::vector<Tensor> inputs;
    inputs.reserve(grads.size() + saved_.size());
    for (size_t i = 0; i < j.output_metas_.size(); ++i) {
      const Tensor g = i < grads.size() ? grads[i] : Tensor();
      const JointGraph::OutputMeta& m = j.output_metas_[i];
      // Recorded with contiguous gradients (ones_like): one that arrives expanded (sum's) is made so.
      inputs.push_back(g.defined() ? g.contiguous() : zeros(m.sizes, TensorOptions(m.dtype, m.device)));
    }
    inputs.insert(inputs.end(), saved_.begin(), saved_.end());
    CapturedGraph::RunOptions options;
    options.record_autograd = false;
    return j.backward_run_->run(inputs, options);
  }

  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_variables() override {
    saved_.clear();
    released_ = true;
  }

 private:
  std::shared_ptr<const JointGraph> joint_;
  std::vector<Tensor> saved_;
  std::vector<uint64_t> versions_;
  bool released_ = false;
};

std::shared_ptr<JointGraph> JointGraph::record(std::shared_ptr<const CapturedGraph> forward, GraphCapture& capture,
                                               const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                                               std::string* why_not) {
  auto fail = [&](std::string reason) {
    *why_not = std::move(reason);
    return nullptr;
  };
  auto joint = std::shared_ptr<JointGraph>(new JointGraph());
  // Where gradients go: the inputs and the captured tensors (parameters) that require grad.
  std::unordered_set<int> readable;  // inputs and constants: values the call did not make
  std::vector<Tensor> targets;
  std::unordered_set<int> target_ids;
  auto add_target = [&](const Tensor& t, int id) {
    readable.insert(id);
    if (t.defined() && requires_grad(t) && target_ids.insert(id).second) {
      targets.push_back(t);
      joint->targets_.push_back(id);
    }
  };
  for (size_t i = 0; i < inputs.size(); ++i) add_target(inputs[i], inputs[i].defined() ? capture.find(inputs[i]) : -1);
  for (const auto& [id, t] : forward->constants()) add_target(t, id);
  if (targets.empty()) return fail("nothing the call reads requires grad");
  for (const CapturedGraph::Node& node : forward->nodes())
    for (const CapturedGraph::Slot& r : node.results)
      if (r.kind == CapturedGraph::Slot::Value && target_ids.count(r.value))
        return fail(fmt::format("op '{}' writes in place to a tensor that requires grad",
                                node.name()));

  std::vector<Tensor> differentiable;
  std::unordered_set<int> seen;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& o = outputs[k];
    if (!o.defined() || !requires_grad(o)) continue;
    const int id = forward->outputs()[k];
    if (readable.count(id)) return fail(fmt::format("output {} is one of the tensors the call read", k));
    if (!seen.insert(id).second) return fail(fmt::format("output {} is an earlier output again", k));
    for (const Tensor& t : inputs)
      if (t.defined() && t.impl()->storage().get() == o.impl()->storage().get())
        return fail(fmt::format("output {} is a view of an input", k));
    for (const auto& [cid, t] : forward->constants())
      if (t.impl()->storage().get() == o.impl()->storage().get())
        return fail(fmt::format("output {} is a view of a tensor the call read", k));
    differentiable.push_back(o);
    joint->differentiable_outputs_.push_back(static_cast<int>(k));
    joint->output_metas_.push_back({o.sizes(), o.dtype(), o.device()});
  }
  if (differentiable.empty()) return fail("no output requires grad");

  // The backward, once, with ones as the outputs' gradients: the ops its formulas run are the program.
  std::vector<Tensor> grads;
  for (const Tensor& o : differentiable) grads.push_back(ones_like(o));
  joint->backward_ = std::make_shared<CapturedGraph>();
  {
    GraphCapture recording(*joint->backward_, grads, capture);
    TensorList target_grads;
    try {
      target_grads = autograd::grad(differentiable, targets, grads, /*retain_graph=*/true, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    } catch (const std::exception& e) {
      return fail(fmt::format("its backward failed while recorded: {}", e.what()));
    }
    if (recording.broken()) return fail("its backward could not be recorded: " + recording.break_reason());
    recording.finish(target_grads);
    joint->saved_ = recording.saved_for_backward();
  }
  joint->forward_ = std::move(forward);
  const RecomputePlan recompute =
      plan_recompute(*joint->forward_, joint->backward_, joint->saved_, joint->differentiable_outputs_.size());
  joint->saved_ = recompute.saved;
  joint->keep_.clear();
  for (int v : joint->saved_)
    if (v >= 0) joint->keep_.push_back(v);
  joint->keep_.insert(joint->keep_.end(), joint->targets_.begin(), joint->targets_.end());
  int dead_forward = 0, dead_backward = 0;
  joint->forward_run_ = eliminate_dead_nodes(joint->forward_, joint->keep_, &dead_forward);
  joint->backward_run_ = eliminate_dead_nodes(recompute.backward, {}, &dead_backward);
  int scatter_sums = 0;
  joint->backward_run_ = fold_scatter_sums(joint->backward_run_, &scatter_sums);
  int numbers_forward = 0, numbers_backward = 0;
  joint->forward_run_ = hoist_scalar_constants(joint->forward_run_, joint->keep_, &numbers_forward);
  joint->backward_run_ = hoist_scalar_constants(joint->backward_run_, {}, &numbers_backward);
  const std::string dead =
      fmt::format("{} saved values recomputed in backward ({} kB not kept), {} dead ops dropped, {} sums of "
                  "pieces written in place, {} numbers made once",
                  recompute.recomputed, recompute.bytes / 1024, dead_forward + dead_backward, scatter_sums,
                  numbers_forward + numbers_backward);
  if (!fusion_enabled()) {
    joint->fusion_note_ = dead + "; fusion off (TRAINRUN_COMPILE_FUSION=0)";
    return joint;
  }
  int activations = 0, moved_forward = 0, moved_backward = 0;
  joint->forward_run_ = fold_gemm_activations(joint->forward_run_, joint->keep_, &activations);
  // (before fusion: a sum reading a view's base can join the loop that makes it)
  joint->forward_run_ = reduce_under_views(joint->forward_run_, &moved_forward);
  joint->backward_run_ = reduce_under_views(joint->backward_run_, &moved_backward);
  int unread = 0;  // (views only those sums read)
  if (moved_forward > 0) joint->forward_run_ = eliminate_dead_nodes(joint->forward_run_, joint->keep_, &unread);
  if (moved_backward > 0) joint->backward_run_ = eliminate_dead_nodes(joint->backward_run_, {}, &unread);
  try {
    const FusionResult f = fuse_pointwise(joint->forward_run_, joint->keep_);
    const FusionResult b = fuse_pointwise(joint->backward_run_, {});
    joint->forward_run_ = f.graph;
    joint->backward_run_ = b.graph;
    joint->fusion_note_ = fmt::format("{}; forward: {} activations in GEMMs, {} loops for {} ops, backward: {} loops "
                                      "for {} ops ({} sums of views read their base)", dead, activations, f.loops,
                                      f.ops_fused, b.loops, b.ops_fused, moved_forward + moved_backward);
  } catch (const ValueError& e) {  // no compiler, or it failed: the recorded ops run one by one
    joint->fusion_note_ = fmt::format("{}; not fused: {}", dead, e.what());
  }
  return joint;
}

std::vector<Tensor> JointGraph::run(const std::vector<Tensor>& inputs) const {
  std::optional<profiling::Range> range;  // (PyTorch's name for a compiled call's forward)
  if (profiling::active()) range.emplace("CompiledFunction");
  CapturedGraph::RunOptions options;
  options.record_autograd = false;
  options.keep = &keep_;
  std::vector<Tensor> values = forward_run_->run(inputs, options);
  const size_t num_outputs = forward_->outputs().size();
  const auto saved_begin = values.begin() + static_cast<std::ptrdiff_t>(num_outputs);
  const auto targets_begin = values.end() - static_cast<std::ptrdiff_t>(targets_.size());
  if (!GradMode::is_enabled()) {  // (recorded with grad on, run under no_grad: no graph wanted)
    values.resize(num_outputs);
    return values;
  }
  std::vector<Edge> edges;
  bool any = false;
  for (auto it = targets_begin; it != values.end(); ++it) {
    edges.push_back(gradient_edge(*it));
    any = any || edges.back().valid();
  }
  if (any) {
    std::vector<Tensor> saved;  // one per saved value; undefined where the backward recomputes it
    saved.reserve(saved_.size());
    auto next = saved_begin;
    for (int v : saved_) saved.push_back(v >= 0 ? *next++ : Tensor());
    auto node = std::make_shared<CompiledBackward>(std::move(edges), shared_from_this(), std::move(saved));
    node->set_num_inputs(static_cast<uint32_t>(differentiable_outputs_.size()));
    for (size_t k = 0; k < differentiable_outputs_.size(); ++k)
      set_history(values[differentiable_outputs_[k]], node, static_cast<uint32_t>(k));
  }
  values.resize(num_outputs);
  return values;
}

}  // namespace trainrun::compile
