#include "nn/init.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace trainrun {
namespace nn {
namespace init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  TR_CHECK(t.dim() >= 2, ValueError, "init: fan in/out need at least 2 dims, got shape {}", t.shape_str());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(const std::string& nonlinearity, double a) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity == "conv2d") return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1 + a * a));
  throw ValueError(fmt::format("calculate_gain: unsupported nonlinearity '{}'", nonlinearity));
}

Tensor& uniform_(Tensor& t, double a, double b) {
  NoGradGuard no_grad;
  return trainrun::uniform_(t, a, b);
}

Tensor& normal_(Tensor& t, double mean, double std) {
  NoGradGuard no_grad;
  return trainrun::normal_(t, mean, std);
}

namespace {
double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  TR_CHECK(mode == "fan_in" || mode == "fan_out", ValueError, "kaiming init: mode must be fan_in or fan_out, got '{}'",
           mode);
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(mode == "fan_in" ? fan_in : fan_out));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  return init::uniform_(t, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) {
  return init::normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity));
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return init::uniform_(t, -bound, bound);
}

Tensor& xavier_normal_(Tensor& t, double gain) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b) {
  TR_CHECK(a < b, ValueError, "trunc_normal_: the interval [{}, {}] is empty", a, b);
  NoGradGuard no_grad;
  trainrun::normal_(t, mean, std);
  // Resample what fell outside; each round keeps most of the rest.
  for (int round = 0; round < 100; ++round) {
    Tensor outside = logical_or(lt(t, a), gt(t, b));
    if (!any(outside).item<bool>()) return t;
    Tensor fresh = empty(t.sizes(), TensorOptions(t.dtype(), t.device()));
    trainrun::normal_(fresh, mean, std);
    Tensor replaced = where(outside, fresh, t);
    copy_(t, replaced);
  }
  clamp_(t, a, b);
  return t;
}

Tensor& zeros_(Tensor& t) {
  NoGradGuard no_grad;
  return zero_(t);
}

Tensor& ones_(Tensor& t) {
  NoGradGuard no_grad;
  return fill_(t, 1);
}

}  // namespace init
}  // namespace nn
}  // namespace trainrun
