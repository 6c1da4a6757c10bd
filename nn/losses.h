#pragma once
// Losses beyond cross_entropy and nll_loss (which live in tensor/'s
// nn_functional.h), built from differentiable ops. reduction: "mean",
// "sum" or "none".
#include <string>

#include "tensor/tensor.h"

namespace trainrun {
namespace nn {

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// Numerically stable: max(x, 0) - x t + log(1 + exp(-|x|)).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const std::string& reduction = "mean");

}  // namespace nn
}  // namespace trainrun
