// Fits a linear regression y = X w + b by gradient descent, using only the
// tensor core (hand-written gradients until autograd lands), and prints the
// recovered weights next to the true ones.
#include <cstdio>

#include "tensor/ops.h"

using namespace trainrun;

int main() {
  manual_seed(0);
  const int64_t n = 4096, d = 8;
  Tensor w_true = arange(1, d + 1, 1, DType::Float32).view({d, 1}) * 0.5;
  Tensor X = randn({n, d});
  Tensor y = add(matmul(X, w_true), randn({n, 1}), 0.01) + 3.0;

  Tensor w = zeros({d, 1}), b = zeros({1});
  const double lr = 0.1;
  for (int step = 0; step <= 200; ++step) {
    Tensor err = matmul(X, w) + b - y;                       // [n, 1]
    Tensor loss = mean(err * err);
    Tensor grad_w = matmul(X.t(), err) * (2.0 / n);          // [d, 1]
    Tensor grad_b = sum(err, {0}) * (2.0 / n);               // [1]
    sub_(w, grad_w, lr);
    sub_(b, grad_b, lr);
    if (step % 50 == 0) std::printf("step %3d  loss %.6f\n", step, loss.item<double>());
  }
  std::printf("learned w: %s\n", w.view({d}).str().c_str());
  std::printf("true    w: %s\n", w_true.view({d}).str().c_str());
  std::printf("learned b: %s (true 3.0)\n", b.str().c_str());
  double max_err = amax(abs(w - w_true)).item<double>();
  std::printf("max |w - w_true| = %.2e\n", max_err);
  return max_err < 1e-2 ? 0 : 1;
}
