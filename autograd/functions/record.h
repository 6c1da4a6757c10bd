#pragma once
// What every autograd kernel does: run the op below autograd, and when grad
// mode is on and an input requires grad, record a node whose backward is a
// formula over the incoming gradient and the tensors it saved.
#include <functional>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_variable.h"
#include "autograd/variable.h"
#include "tensor/dispatcher.h"

namespace trainrun {

// Gradients of the inputs (undefined where not needed) from the output's
// gradient and the saved tensors (inputs asked for, then the result if saved).
using Formula = std::function<TensorList(const Tensor& grad, const TensorList& saved)>;

class FormulaNode final : public Node {
 public:
  FormulaNode(std::string name, Formula formula) : name_(std::move(name)), formula_(std::move(formula)) {}
  TensorList apply(TensorList&& grads) override;
  std::string name() const override { return name_; }
  void release_variables() override {
    for (auto& s : saved_) s.reset();
  }
  void save(const Tensor& t, bool is_output) { saved_.emplace_back(t, is_output); }

 private:
  std::string name_;
  Formula formula_;
  std::vector<SavedVariable> saved_;
};

bool any_requires_grad(const TensorList& inputs);

// Refuses out= and in-place forms when they would need a graph: PyTorch
// refuses out= too, and in-place history rewriting is not supported yet.
void check_out_allowed(const char* op, const Tensor& out, const TensorList& inputs);

// Runs forward() with Autograd excluded; records `name` when needed.
// save: the inputs the formula needs (pass undefined to skip a slot);
// save_result: whether the formula also needs the output (appended last).
Tensor record(const char* name, const TensorList& inputs, const TensorList& save, bool save_result,
              const std::function<Tensor()>& forward, Formula formula);

// The gradient of a broadcast input: g summed over the broadcast dims down
// to `shape`.
Tensor sum_to(const Tensor& g, const IntList& shape);
// g in dtype d (gradients have their input's dtype); undefined stays undefined.
Tensor cast_to(const Tensor& g, DType d);
// 1 - x.
Tensor rsub_one(const Tensor& x);

}  // namespace trainrun
