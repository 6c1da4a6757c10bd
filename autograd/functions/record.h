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
// The same for ops with several outputs: one gradient per output, undefined
// for outputs that received none.
using MultiFormula = std::function<TensorList(const TensorList& grads, const TensorList& saved)>;

class FormulaNode final : public Node {
 public:
  FormulaNode(std::string name, Formula formula);
  // numbered: a built-in op's node, named as PyTorch numbers them (a Python autograd.Function's is not)
  FormulaNode(std::string name, MultiFormula formula, uint32_t num_outputs, bool numbered = true);
  TensorList apply(TensorList&& grads) override;
  std::string name() const override { return name_; }
  std::string pytorch_name() const override;
  void release_variables() override {
    for (auto& s : saved_) s.reset();
  }
  void save(const Tensor& t, bool is_output) { saved_.emplace_back(t, is_output); }

 private:
  std::string name_;
  bool numbered_ = true;
  MultiFormula formula_;
  std::vector<SavedVariable> saved_;
};

bool any_requires_grad(const TensorList& inputs);

// Points node's edges at the inputs' gradients (undefined inputs get none)
// and saves `save` for its formula.
void connect(FormulaNode& node, const TensorList& inputs, const TensorList& save);

// Runs forward() with Autograd excluded; records `name` when needed.
// save: the inputs the formula needs (pass undefined to skip a slot);
// save_result: whether the formula also needs the output (appended last).
Tensor record(const char* name, const TensorList& inputs, const TensorList& save, bool save_result,
              const std::function<Tensor()>& forward, Formula formula);

// record() for ops with several outputs, all differentiable (outputs are
// not saved).
TensorList record_multi(const char* name, const TensorList& inputs, const TensorList& save,
                        const std::function<TensorList()>& forward, MultiFormula formula);

// record() for ops that also have out= and in-place forms; forward(inputs,
// out) runs the op (out undefined: a new result). Outside a graph this is the
// plain op. In place under autograd, the tensor written (out, one of the
// inputs) takes the new node as its history, as PyTorch rebases it: the op
// runs out of place (on a snapshot of out when the formula saves it) and the
// result is copied into out. out= into a separate tensor is refused, as
// PyTorch does, and so is writing into a leaf that requires grad or into a
// tensor that shares memory with another (a view or its base): their
// gradients would silently go wrong.
using OutForward = std::function<Tensor(const TensorList& inputs, const Tensor& out)>;
Tensor record_out(const char* name, const Tensor& out, const TensorList& inputs, const TensorList& save,
                  bool save_result, const OutForward& forward, Formula formula);

// The gradient of a broadcast input: g summed over the broadcast dims down
// to `shape`.
Tensor sum_to(const Tensor& g, const IntList& shape);
// The gradient g of a reduction over `dims` (all when empty) back to the
// input's shape: the reduced dims re-inserted (unless kept) and broadcast.
Tensor expand_reduced(const Tensor& g, const IntList& shape, const IntList& dims, bool keepdim);
// How many elements each output of such a reduction combines.
int64_t reduced_count(const IntList& shape, const IntList& dims);
// g in dtype d (gradients have their input's dtype); undefined stays undefined.
Tensor cast_to(const Tensor& g, DType d);
// 1 - x.
Tensor rsub_one(const Tensor& x);

}  // namespace trainrun
