#include "nn/batch_norm.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "nn/init.h"
#include "tensor/ops.h"

namespace trainrun {
namespace nn {

BatchNorm::BatchNorm(const char* type_name, int64_t c, std::vector<int64_t> ranks, double eps_, double momentum_,
                     bool affine, bool track)
    : Module(type_name), num_features(c), eps(eps_), momentum(momentum_), ranks_(std::move(ranks)), affine_(affine),
      track_(track) {
  TR_CHECK(c > 0, ValueError, "{}: num_features must be positive, got {}", type_name, c);
  if (affine) {
    register_parameter("weight", ones({c}, parameter_options()));
    register_parameter("bias", zeros({c}, parameter_options()));
  }
  if (track) {
    register_buffer("running_mean", zeros({c}, parameter_options()));
    register_buffer("running_var", ones({c}, parameter_options()));
    register_buffer("num_batches_tracked", zeros({}, parameter_options(DType::Int64)));
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  TR_CHECK(std::find(ranks_.begin(), ranks_.end(), x.dim()) != ranks_.end() && x.size(1) == num_features, ValueError,
           "{}({}): input of shape {} has the wrong rank or channel count", type_name(), num_features, x.shape_str());
  IntList dims, stat_shape(x.dim(), 1);
  stat_shape[1] = num_features;
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) {
      dims.push_back(d);
      count *= x.size(d);
    }
  Tensor mean_t, var_t;
  if (is_training() || !track_) {
    TR_CHECK(count > 1, ValueError, "{}: expected more than 1 value per channel in training, got input {}",
             type_name(), x.shape_str());
    mean_t = mean(x, dims, true);
    var_t = var(x, dims, /*correction=*/0, true);  // biased, as the normalisation uses
    if (track_ && is_training()) {
      NoGradGuard no_grad;
      Tensor& rm = buffer("running_mean");
      Tensor& rv = buffer("running_var");
      Tensor unbiased = mul(reshape(detach(var_t), {num_features}), static_cast<double>(count) / (count - 1));
      Tensor new_mean = add(mul(rm, 1 - momentum), mul(reshape(detach(mean_t), {num_features}), momentum));
      Tensor new_var = add(mul(rv, 1 - momentum), mul(unbiased, momentum));
      copy_(rm, new_mean);
      copy_(rv, new_var);
      add_(buffer("num_batches_tracked"), 1);
    }
  } else {
    mean_t = reshape(buffer("running_mean"), stat_shape);
    var_t = reshape(buffer("running_var"), stat_shape);
  }
  // y = x * scale + shift, scale = weight / sqrt(var + eps), shift = bias - mean * scale: PyTorch's CPU form,
  // one pass over x (and three in backward) where normalising, then scaling and shifting, took four (and eight).
  Tensor scale = rsqrt(add(var_t, eps));
  if (affine_) scale = mul(scale, reshape(param("weight"), stat_shape));
  Tensor shift = neg(mul(mean_t, scale));
  if (affine_) shift = add(shift, reshape(param("bias"), stat_shape));
  return addcmul(shift, x, scale);
}

}  // namespace nn
}  // namespace trainrun
