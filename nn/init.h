#pragma once
// Parameter initialisation, seeded by the global generator (manual_seed),
// with PyTorch's formulas. fan_in/fan_out as torch.nn.init computes them.
#include "tensor/factories.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace nn {

// What a layer's constructor makes its parameters and buffers with: the
// thread's default device (`with trainrun.device("meta")` builds a model
// that holds no memory) and `dtype` (default: the default float dtype).
inline TensorOptions parameter_options(std::optional<DType> dtype = std::nullopt) {
  return TensorOptions(dtype.value_or(default_float_dtype()), default_device());
}

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
