#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

std::vector<double> values_of(const Tensor& t) {
  Tensor c = contiguous(detach(t).to(DType::Float64));
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

// Address of flat element k of t (any strides).
double* element(const Tensor& t, int64_t k) {
  double* p = static_cast<double*>(t.data_ptr());
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    p += (k % t.size(d)) * t.stride(d);
    k /= t.size(d);
  }
  return p;
}

}  // namespace

bool gradcheck(const DifferentiableFunction& f, const TensorList& inputs, GradcheckOptions o) {
  for (size_t i = 0; i < inputs.size(); ++i)
    TR_CHECK(inputs[i].dtype() == DType::Float64 && requires_grad(inputs[i]), ValueError,
             "gradcheck: input {} must be float64 and require grad (got {})", i, dtype_name(inputs[i].dtype()));
  Tensor y = f(inputs);
  const int64_t n_out = y.numel();
  // Analytical: one vector-Jacobian product per output element.
  std::vector<std::vector<std::vector<double>>> analytical(inputs.size());  // [input][out][in elem]
  // An output that does not depend on the inputs through the graph (a
  // constant gradient, in gradgradcheck) has a zero Jacobian.
  const bool constant = !requires_grad(y);
  for (int64_t j = 0; j < n_out; ++j) {
    if (constant) {
      for (size_t i = 0; i < inputs.size(); ++i) analytical[i].push_back(std::vector<double>(inputs[i].numel(), 0.0));
      continue;
    }
    Tensor onehot = zeros(y.sizes(), y.dtype());
    *element(onehot, j) = 1.0;
    TensorList grads = autograd::grad({y}, inputs, {onehot}, /*retain_graph=*/true, false, /*allow_unused=*/true);
    for (size_t i = 0; i < inputs.size(); ++i)
      analytical[i].push_back(grads[i].defined() ? values_of(grads[i]) : std::vector<double>(inputs[i].numel(), 0.0));
  }
  // Numerical: central differences, one input element at a time, written
  // through the data pointer. f runs with grad mode as it is: in
  // gradgradcheck, f itself calls autograd.
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int64_t k = 0; k < inputs[i].numel(); ++k) {
      double* x = element(inputs[i], k);
      const double saved = *x;
      *x = saved + o.eps;
      std::vector<double> plus = values_of(f(inputs));
      *x = saved - o.eps;
      std::vector<double> minus = values_of(f(inputs));
      *x = saved;
      for (int64_t j = 0; j < n_out; ++j) {
        const double num = (plus[j] - minus[j]) / (2 * o.eps), ana = analytical[i][j][k];
        TR_CHECK(std::abs(ana - num) <= o.atol + o.rtol * std::abs(num), ValueError,
                 "gradcheck: Jacobian mismatch for input {} (shape {}) element {} and output element {}: "
                 "autograd {} vs finite difference {}",
                 i, inputs[i].shape_str(), k, j, ana, num);
      }
    }
  }
  return true;
}

bool gradgradcheck(const DifferentiableFunction& f, const TensorList& inputs, GradcheckOptions o) {
  // Each input's gradient, for a fixed random output gradient, as a
  // function of the inputs, checked like any other function.
  Tensor y = f(inputs);
  Tensor v = randn(y.sizes(), DType::Float64);
  for (size_t i = 0; i < inputs.size(); ++i) {
    DifferentiableFunction grad_i = [&](const TensorList& in) {
      Tensor out = f(in);
      TensorList grads = autograd::grad({out}, in, {v}, true, /*create_graph=*/true, /*allow_unused=*/true);
      return grads[i].defined() ? grads[i] : zeros(in[i].sizes(), DType::Float64);
    };
    gradcheck(grad_i, inputs, o);
  }
  return true;
}

}  // namespace trainrun
