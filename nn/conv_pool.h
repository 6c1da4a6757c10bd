#pragma once
// Convolution and pooling layers over NCHW (or unbatched CHW) images, with
// PyTorch's parameter names, shapes and default initialisation.
#include "nn/module.h"

namespace trainrun {
namespace nn {

// weight [out_channels, in_channels / groups, kH, kW], bias [out_channels].
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, IntList kernel_size, IntList stride = {1}, IntList padding = {0},
         IntList dilation = {1}, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t in_channels, out_channels, groups;
  IntList kernel_size, stride, padding, dilation;
  bool has_bias;
};

// stride defaults to the kernel size, as in PyTorch.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntList kernel_size, IntList stride = {}, IntList padding = {0}, IntList dilation = {1},
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  IntList kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntList kernel_size, IntList stride = {}, IntList padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  IntList kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

}  // namespace nn
}  // namespace trainrun
