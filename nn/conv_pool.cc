#include "nn/conv_pool.h"

#include <cmath>

#include "nn/init.h"
#include "tensor/ops.h"

namespace trainrun {
namespace nn {
namespace {

// PyTorch's _pair: one value means both dims.
IntList pair(const IntList& v, const char* layer, const char* what) {
  TR_CHECK(v.size() == 1 || v.size() == 2, ValueError, "{}: {} must have 1 or 2 values, got [{}]", layer, what,
           fmt::join(v, ", "));
  return v.size() == 1 ? IntList{v[0], v[0]} : v;
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, IntList kernel, IntList stride_, IntList padding_, IntList dilation_,
               int64_t groups_, bool bias)
    : Module("Conv2d"),
      in_channels(in),
      out_channels(out),
      groups(groups_),
      kernel_size(pair(kernel, "Conv2d", "kernel_size")),
      stride(pair(stride_, "Conv2d", "stride")),
      padding(pair(padding_, "Conv2d", "padding")),
      dilation(pair(dilation_, "Conv2d", "dilation")),
      has_bias(bias) {
  TR_CHECK(in > 0 && out > 0 && groups > 0, ValueError,
           "Conv2d: in_channels ({}), out_channels ({}) and groups ({}) must be positive", in, out, groups);
  TR_CHECK(in % groups == 0 && out % groups == 0, ValueError,
           "Conv2d: in_channels ({}) and out_channels ({}) must both be divisible by groups ({})", in, out, groups);
  // PyTorch's reset_parameters: kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  Tensor w = empty({out, in / groups, kernel_size[0], kernel_size[1]}, parameter_options());
  init::kaiming_uniform_(w, std::sqrt(5.0));
  register_parameter("weight", w);
  if (bias) {
    Tensor b = empty({out}, parameter_options());
    const double bound = 1.0 / std::sqrt(static_cast<double>(in / groups * kernel_size[0] * kernel_size[1]));
    init::uniform_(b, -bound, bound);
    register_parameter("bias", b);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  const int64_t channel_dim = x.dim() == 4 ? 1 : 0;
  TR_CHECK((x.dim() == 3 || x.dim() == 4) && x.size(channel_dim) == in_channels, ValueError,
           "Conv2d({}, {}): expected an input of shape [N, {}, H, W] or [{}, H, W], got {}", in_channels, out_channels,
           in_channels, in_channels, x.shape_str());
  return conv2d(x, param("weight"), has_bias ? param("bias") : Tensor(), stride, padding, dilation, groups);
}

MaxPool2d::MaxPool2d(IntList kernel, IntList stride_, IntList padding_, IntList dilation_, bool ceil)
    : Module("MaxPool2d"),
      kernel_size(pair(kernel, "MaxPool2d", "kernel_size")),
      stride(stride_.empty() ? kernel_size : pair(stride_, "MaxPool2d", "stride")),
      padding(pair(padding_, "MaxPool2d", "padding")),
      dilation(pair(dilation_, "MaxPool2d", "dilation")),
      ceil_mode(ceil) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return std::get<0>(max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode));
}

AvgPool2d::AvgPool2d(IntList kernel, IntList stride_, IntList padding_, bool ceil, bool include_pad)
    : Module("AvgPool2d"),
      kernel_size(pair(kernel, "AvgPool2d", "kernel_size")),
      stride(stride_.empty() ? kernel_size : pair(stride_, "AvgPool2d", "stride")),
      padding(pair(padding_, "AvgPool2d", "padding")),
      ceil_mode(ceil),
      count_include_pad(include_pad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

}  // namespace nn
}  // namespace trainrun
