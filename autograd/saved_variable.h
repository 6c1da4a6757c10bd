#pragma once
// A tensor saved by a node for its backward formula. It remembers the
// tensor's version so that modifying it in place before backward is caught
// with an error naming the node, instead of giving a silently wrong gradient.
// A node's own outputs are saved detached, so that they do not keep the node
// alive through a cycle.
#include <string>

#include <memory>

#include "autograd/node.h"
#include "autograd/saved_tensor_hooks.h"

namespace trainrun {

class SavedVariable {
 public:
  SavedVariable() = default;
  // is_output: t is an output of the node that saves it.
  SavedVariable(const Tensor& t, bool is_output);

  // The saved tensor; throws ValueError naming `owner` when it was modified
  // in place since it was saved, or released by an earlier backward. A saved
  // output comes back as output `output_nr` of `owner` while grad mode is on
  // (create_graph), so that double backward reaches the owner's inputs.
  Tensor unpack(const std::shared_ptr<Node>& owner) const;
  void reset();
  bool defined() const { return saved_ || data_.defined(); }

 private:
  Tensor data_;
  // With saved_tensors_hooks active at save: what pack returned, the hooks to unpack it with, and the saved
  // tensor's version counter (data_ stays empty).
  std::shared_ptr<void> packed_;
  std::shared_ptr<const SavedTensorHooks> hooks_;
  std::weak_ptr<const uint64_t> counter_;  // (weak: a counter shared counts as a view of the tensor)
  std::string shape_;
  uint64_t version_ = 0;
  bool saved_ = false;  // false for a default (undefined) slot
  bool is_output_ = false;
  uint32_t output_nr_ = 0;
  bool released_ = false;
};

}  // namespace trainrun
