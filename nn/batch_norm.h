#pragma once
// BatchNorm1d/2d: normalizes each channel (dim 1) over the batch and the
// other dims in training, tracking running statistics as buffers
// (running_mean, running_var, num_batches_tracked) for eval.
#include "nn/module.h"

namespace trainrun {
namespace nn {

class BatchNorm : public Module {
 public:
  // dims: the input ranks accepted (1d: 2 or 3, 2d: 4).
  BatchNorm(const char* type_name, int64_t num_features, std::vector<int64_t> ranks, double eps, double momentum,
            bool affine, bool track_running_stats);
  Tensor forward(const Tensor& x) override;
  int64_t num_features;
  double eps, momentum;

 private:
  std::vector<int64_t> ranks_;
  bool affine_, track_;
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", num_features, {2, 3}, eps, momentum, affine, track_running_stats) {}
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", num_features, {4}, eps, momentum, affine, track_running_stats) {}
};

}  // namespace nn
}  // namespace trainrun
