#pragma once
// The custom-operator API (PyTorch 2.4's torch.library.custom_op): register
// an op by a namespaced name with a CPU kernel, an optional CUDA kernel and
// an optional backward formula. It then dispatches like a built-in op (on
// the inputs' device, through autograd), and a CustomOp handle calls it.
#include <functional>
#include <string>

#include "autograd/node.h"
#include "tensor/dispatcher.h"

namespace trainrun {

struct CustomOpDefinition {
  std::function<Tensor(const TensorList& inputs)> cpu;   // required
  std::function<Tensor(const TensorList& inputs)> cuda;  // optional
  // Gradients of the inputs (undefined where none) from the output's
  // gradient, the inputs and the output. Without it the op refuses inputs
  // that need a gradient.
  std::function<TensorList(const Tensor& grad, const TensorList& inputs, const Tensor& output)> backward;
};

// Every custom op has this dispatcher signature: the dispatcher's kernels
// for it are shared trampolines that find the user's functions by name.
using CustomOpSignature = Tensor(const std::string& name, const TensorList& inputs);

class CustomOp {
 public:
  explicit CustomOp(std::string name) : name_(std::move(name)), op_(name_) {}
  Tensor operator()(const TensorList& inputs) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Op<CustomOpSignature> op_;
};

// name: "namespace::op". Throws ValueError for a bad or taken name, or a missing CPU kernel.
CustomOp register_custom_op(const std::string& name, CustomOpDefinition definition);

}  // namespace trainrun
