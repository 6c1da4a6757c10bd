#pragma once
// Checks backward formulas against finite differences, like
// torch.autograd.gradcheck: every entry of the Jacobian of f at `inputs`
// (float64 tensors that require grad) computed by autograd must match a
// central difference. gradgradcheck does the same for the gradient itself
// (double backward, through create_graph).
#include <functional>

#include "autograd/node.h"

namespace trainrun {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

using DifferentiableFunction = std::function<Tensor(const TensorList& inputs)>;

// Throws ValueError naming the input, the element, the output element and
// both values at the first mismatch; returns true otherwise.
bool gradcheck(const DifferentiableFunction& f, const TensorList& inputs, GradcheckOptions options = {});
bool gradgradcheck(const DifferentiableFunction& f, const TensorList& inputs, GradcheckOptions options = {});

}  // namespace trainrun
