#pragma once
// A program of op calls recorded at the dispatcher by GraphCapture
// (graph_capture.h): values are numbered, each node is one op with its
// arguments (values, lists of values, or constants such as sizes and
// scalars) and the values it produced. Running it calls the same ops from
// the top of the dispatcher on new inputs, so autograd records its graph as
// for the eager call and backward works as it did.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/dispatcher.h"
#include "tensor/ivalue.h"

namespace trainrun::compile {

struct FusedKernel;   // compile/fused_kernel.h
class ExternalCall;   // compile/external_call.h

class CapturedGraph {
 public:
  // One argument or result slot of a node.
  struct Slot {
    enum Kind { Value, ValueList, Constant };
    Kind kind = Constant;
    int value = -1;           // Value
    std::vector<int> values;  // ValueList
    IValue constant;          // Constant
  };
  struct Node {
    const OpTable* op = nullptr;  // nullptr: an allocation (a factory the call ran): alloc_* below
    IntList alloc_sizes, alloc_strides;
    DType alloc_dtype{};
    Device alloc_device;
    // random_fill_ from the default generator: its (seed, offset) arguments
    // are drawn anew at each run, reserving this many elements.
    int64_t random_elements = -1;
    // Set instead of op: a generated loop doing several pointwise ops at once (compile/fusion.h).
    std::shared_ptr<const FusedKernel> fused;
    // Set instead of op: a call outside the dispatcher (a Python custom op), made again when run.
    std::shared_ptr<const ExternalCall> external;
    bool is_alloc() const { return op == nullptr && fused == nullptr && external == nullptr; }
    std::string name() const;  // the op's, the loop's, the call's, or "empty_strided"
    std::vector<Slot> args;
    std::vector<Slot> results;  // Value or ValueList
    bool grad_enabled = true;   // grad mode when recorded (a no_grad block inside the call stays one)
  };

  // A new value that run() takes as its next input.
  int add_input();
  // A new value bound to `t` itself (a parameter, a buffer: read when run, not copied).
  int add_constant(const Tensor& t);
  int new_value() { return num_values_++; }
  // What value `id` was when recorded (fusion reads shapes and dtypes).
  struct ValueMeta {
    bool known = false;
    IntList sizes, strides;
    DType dtype{};
    Device device;
    // Row-major and dense (size-1 dims' strides aside).
    bool contiguous() const {
      int64_t expected = 1;
      for (size_t d = sizes.size(); d-- > 0;) {
        if (sizes[d] != 1 && strides[d] != expected) return false;
        expected *= sizes[d];
      }
      return true;
    }
  };
  void set_meta(int id, const Tensor& t);
  void set_meta(int id, ValueMeta meta);
  const ValueMeta& meta(int id) const;
  void add_node(Node node) { nodes_.push_back(std::move(node)); }
  // -1: an undefined output (a gradient nothing flows to). Ends the graph: run() may be called from then on.
  void set_outputs(std::vector<int> outputs);
  // The same inputs, constants, values and outputs with other nodes (a fused program); `more_constants`: values
  // those nodes no longer make, bound to these tensors instead.
  std::shared_ptr<CapturedGraph> with_nodes(std::vector<Node> nodes,
                                            std::vector<std::pair<int, Tensor>> more_constants = {}) const;
  // The same program reading `constants` (one per constant, in order) instead: frozen copies of the weights.
  std::shared_ptr<CapturedGraph> with_constants(const std::vector<Tensor>& constants) const;
  // A graph from its parts (a program read back from a file: compile/program_io.h).
  static std::shared_ptr<CapturedGraph> assemble(int num_values, std::vector<int> inputs,
                                                 std::vector<std::pair<int, Tensor>> constants,
                                                 std::vector<Node> nodes, std::vector<int> outputs);

  struct RunOptions {
    // false: every op runs without recording autograd's graph (a joint
    // graph's halves: their gradients come from the recorded backward).
    bool record_autograd = true;
    // Values returned after the outputs (what a backward will read).
    const std::vector<int>* keep = nullptr;
  };
  // The outputs for `inputs` (as many as add_input was called, in order),
  // then the values options.keep names. A value is dropped after the last
  // node that reads it, so a run holds no more than it needs.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const RunOptions& options) const;
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const { return run(inputs, RunOptions{}); }

  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  const std::vector<std::pair<int, Tensor>>& constants() const { return constants_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  int num_values() const { return num_values_; }

  size_t num_nodes() const { return nodes_.size(); }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_constants() const { return constants_.size(); }
  // One line per node: "%5 = mul(%3, %4)", for explain().
  std::string to_string() const;

 private:
  int num_values_ = 0;
  std::vector<int> inputs_;
  std::vector<std::pair<int, Tensor>> constants_;
  std::vector<Node> nodes_;
  std::vector<int> outputs_;
  std::vector<ValueMeta> metas_;
  // Per node, the values no later node reads (and no output is): freed after it. Made by set_outputs.
  std::vector<std::vector<int>> free_after_;
  void make_free_after();
};

}  // namespace trainrun::compile
