#pragma once
// Records the ops one call makes on this thread into a CapturedGraph: the
// Tracing key (below Autograd, so it sees each op once, as the model called
// it) gets a boxed fallback that notes the op, its arguments and its results
// and lets it run. The call itself runs eagerly, so its results are real.
//
// The recording is incomplete, and the graph must not be replayed (a graph
// break; broken() says why), when the call:
//  - reads a tensor's values into Python (item(), tolist(), numpy(), bool()):
//    what it does next may depend on them;
//  - gets a Python value from an op (a data-dependent result);
//  - runs an op with no boxed form (the fallback cannot see it);
//  - runs a backward pass inside the call (the backward of the call itself
//    is recorded separately: a GraphCapture made with `forward` below);
//  - reads a tensor it allocated whose contents no recorded op wrote (a
//    factory that fills memory directly, as tensor(data) does): a replay
//    would allocate it and read garbage. (arange and linspace record ops
//    while a capture runs, for this reason.)
//  - reads into Python the shape of a tensor whose shape depends on values
//    (nonzero, masked_select, boolean indexing, and what is computed from
//    them): a replay would keep the recorded size where Python used it.
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compile/captured_graph.h"
#include "compile/external_call.h"

namespace trainrun::compile {

class GraphCapture {
 public:
  // Starts recording on this thread, with `inputs` the graph's inputs in order.
  GraphCapture(CapturedGraph& graph, const std::vector<Tensor>& inputs);
  // Records the backward of the call `forward` recorded (and finished):
  // `inputs` are the gradients of its outputs; a tensor of the forward call
  // that a backward formula reads becomes a further input, the forward value
  // saved_for_backward() names. A tensor the forward call neither made nor
  // read breaks this recording.
  GraphCapture(CapturedGraph& graph, const std::vector<Tensor>& inputs, const GraphCapture& forward);
  ~GraphCapture();  // stops recording
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  // Maps the call's results to the graph's outputs (a tensor the call did not
  // make is an input or a constant). Ends the recording.
  void finish(const std::vector<Tensor>& outputs);
  bool broken() const { return !break_reason_.empty(); }
  // The value `t` is in the graph, or -1. A tensor saved for backward may be
  // a new TensorImpl over the same data (a saved output is detached): it is
  // that value too.
  int find(const Tensor& t) const;
  // Backward recording: per input after the gradients, the forward value it is.
  const std::vector<int>& saved_for_backward() const { return saved_; }
  const std::string& break_reason() const { return break_reason_; }

  // Something the graph cannot replay happened (python/csrc: item() and
  // numpy() read values into Python, an autograd.Function attached its
  // node): breaks the recording on this thread, if any, saying why.
  static void note_graph_break(const std::string& reason);

  // A call outside the dispatcher (compile/external_call.h) on this thread:
  // what runs between begin and end is not recorded (nor are its breaks);
  // end records one node calling `call` on `inputs`, making `outputs`.
  static void begin_external();
  static void end_external(std::shared_ptr<const ExternalCall> call, const std::vector<Tensor>& inputs,
                           const std::vector<Tensor>& outputs);
  // Leaves the call without recording it (it raised).
  static void abort_external();
  // Whether this thread is recording (and not inside an external call).
  static bool active();
  // Python read t's shape (python/csrc: shape, size(), numel(), len()).
  static void note_shape_read(const Tensor& t);

 private:
  friend struct CaptureFallback;
  GraphCapture(CapturedGraph& graph, const std::vector<Tensor>& inputs, const GraphCapture* forward);
  void record(const OpTable& op, DispatchKey key, DispatchKeySet keys, Stack& stack);
  void allocated(const Tensor& t);
  void stop(std::string reason);
  int bind(const Tensor& t, int id);  // t is value `id` from now on (and kept alive)
  int value_of(const Tensor& t);      // an argument's value: known, or a new constant
  int result_of(const Tensor& t);     // a result's value: known, or a new one
  CapturedGraph::Slot slot_of(const IValue& v);
  // An op reads or writes values of unwritten allocations (see unwritten_): a write fills them, a view joins
  // them, any other read breaks the recording. Called before the op runs; `views_of` gets the group its view
  // results join (-1: none).
  void check_unwritten(const OpTable& op, const std::vector<CapturedGraph::Slot>& args, int* views_of);
  void check_read(int value, const std::string& by);

  CapturedGraph& graph_;
  std::unordered_map<const TensorImpl*, int> ids_;
  std::vector<Tensor> alive_;  // every tensor seen, so no address is reused while recording
  std::string break_reason_;
  bool finished_ = false;
  int depth_ = 0;  // ops running now: what they allocate is theirs, not the call's
  int external_ = 0;  // external calls running now
  GraphCapture* outer_;
  const GraphCapture* forward_ = nullptr;  // set when this records a backward
  std::vector<int> saved_;
  DispatchKeySet saved_included_;
  // Allocations the call made (not an op) that no recorded op has written yet, and views of them: value -> the
  // allocation's value (its group). A group leaves when an op writes any of its values.
  std::unordered_map<int, int> unwritten_;
  std::unordered_set<int> open_groups_;
  // Values whose shape depends on the data: results of nonzero and masked_select, and of ops reading them.
  std::unordered_set<int> value_shaped_;
};

}  // namespace trainrun::compile
