#pragma once
// Leaves and a non-throwing gradcheck wrapper shared by the autograd suites.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace trainrun {

// A float64 leaf that requires grad, uniform in [lo, hi).
inline Tensor leaf(const IntList& shape, double lo = -1.0, double hi = 1.0) {
  Tensor t = add(mul(rand(shape, DType::Float64), hi - lo), lo);
  return set_requires_grad(t);
}
// A non-contiguous leaf: the transpose of a [cols, rows] tensor.
inline Tensor transposed_leaf(int64_t rows, int64_t cols) {
  Tensor base = rand({cols, rows}, DType::Float64);
  Tensor t = base.transpose(0, 1);
  return set_requires_grad(t);
}

using F = DifferentiableFunction;

inline void check(const char* what, const F& f, const TensorList& inputs, bool second_order = false) {
  try {
    gradcheck(f, inputs);
    if (second_order) gradgradcheck(f, inputs);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

}  // namespace trainrun
