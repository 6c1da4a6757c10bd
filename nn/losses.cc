#include "nn/losses.h"

#include "tensor/ops.h"

namespace trainrun {
namespace nn {
namespace {

Tensor reduce(const Tensor& losses, const std::string& reduction, const char* op) {
  if (reduction == "mean") return mean(losses);
  if (reduction == "sum") return sum(losses);
  TR_CHECK(reduction == "none", ValueError, "{}: reduction must be 'mean', 'sum' or 'none', got '{}'", op, reduction);
  return losses;
}

void check_shapes(const Tensor& a, const Tensor& b, const char* op) {
  TR_CHECK(a.sizes() == b.sizes(), ValueError, "{}: input of shape {} and target of shape {} differ", op,
           a.shape_str(), b.shape_str());
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_shapes(input, target, "mse_loss");
  Tensor d = sub(input, target);
  return reduce(mul(d, d), reduction, "mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_shapes(input, target, "l1_loss");
  return reduce(abs(sub(input, target)), reduction, "l1_loss");
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& t, const std::string& reduction) {
  check_shapes(x, t, "binary_cross_entropy_with_logits");
  Tensor losses = add(sub(relu(x), mul(x, t)), log1p(exp(neg(abs(x)))));
  return reduce(losses, reduction, "binary_cross_entropy_with_logits");
}

}  // namespace nn
}  // namespace trainrun
