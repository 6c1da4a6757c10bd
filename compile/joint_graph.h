#pragma once
// A compiled call's forward and backward programs together (as AOTAutograd
// makes them): the forward runs without building autograd's graph, keeping
// only the values the backward reads, and its outputs get one autograd node
// whose backward runs the recorded backward program. A training step so
// costs one graph node instead of one per op, and saves no more than the
// backward formulas read.
//
// Recorded from one eager call: after the forward recording finishes, the
// backward of its outputs (with ones as their gradients) runs once toward
// every input and captured tensor that requires grad, and is recorded too.
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "compile/captured_graph.h"
#include "compile/graph_capture.h"

namespace trainrun::compile {

class JointGraph : public std::enable_shared_from_this<JointGraph> {
 public:
  struct OutputMeta {  // what a missing output gradient is made of (zeros)
    IntList sizes;
    DType dtype{};
    Device device;
  };

  // The joint graph of the call `capture` recorded into `forward` (finished
  // with `outputs`), or null with *why_not saying why it has none: no output
  // requires grad, an output is an input or aliases one, an input that
  // requires grad is written in place, or the backward could not be
  // recorded. The backward runs here, once, with retain_graph: the call's own
  // autograd graph stays usable.
  static std::shared_ptr<JointGraph> record(std::shared_ptr<const CapturedGraph> forward, GraphCapture& capture,
                                            const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                                            std::string* why_not);

  // The call's outputs for `inputs`; those that required grad when recorded
  // are outputs of one node whose backward is the recorded backward.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  // As recorded, and as run (pointwise runs fused into generated loops, compile/fusion.h).
  const CapturedGraph& forward() const { return *forward_; }
  const CapturedGraph& backward() const { return *backward_; }
  const CapturedGraph& forward_run() const { return *forward_run_; }
  const CapturedGraph& backward_run() const { return *backward_run_; }
  // "3 loops for 11 ops", or why nothing was fused.
  const std::string& fusion_note() const { return fusion_note_; }
  // Forward values the backward reads (its inputs after the output gradients).
  size_t num_saved() const {
    size_t n = 0;
    for (int v : saved_) n += v >= 0;
    return n;
  }

 private:
  friend class CompiledBackward;
  std::shared_ptr<const CapturedGraph> forward_;
  std::shared_ptr<CapturedGraph> backward_;
  std::shared_ptr<const CapturedGraph> forward_run_, backward_run_;
  std::string fusion_note_;
  std::vector<int> differentiable_outputs_;  // positions in forward outputs; their gradients are the backward's inputs
  std::vector<OutputMeta> output_metas_;     // one per differentiable output
  std::vector<int> saved_;                   // forward values passed to the backward (-1: it recomputes it)
  std::vector<int> targets_;                 // forward values (inputs, constants) whose gradients the backward gives
  std::vector<int> keep_;                    // saved_ (less -1s) then targets_: what the forward run returns
};

}  // namespace trainrun::compile
