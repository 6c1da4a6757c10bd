#pragma once
// Parameter initialisation, seeded by the global generator (manual_seed),
// with PyTorch's formulas. fan_in/fan_out as torch.nn.init computes them.
#include "tensor/tensor.h"

namespace trainrun {
namespace nn {
namespace init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
// gain for "linear", "relu", "leaky_relu" (with a), "tanh", "sigmoid".
double calculate_gain(const std::string& nonlinearity, double a = 0.0);
Tensor& uniform_(Tensor& t, double a, double b);
Tensor& normal_(Tensor& t, double mean, double std);
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu");
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
// Normal(mean, std) truncated to [a, b], by resampling.
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

}  // namespace init
}  // namespace nn
}  // namespace trainrun
