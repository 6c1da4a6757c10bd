#pragma once
// The node at the end of every path to a leaf: adds the incoming gradient
// into the leaf's .grad, then runs the leaf's post-accumulate-grad hooks.
#include "autograd/node.h"

namespace trainrun {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  TensorList apply(TensorList&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& variable() const { return leaf_; }

 private:
  Tensor leaf_;
};

}  // namespace trainrun
