#pragma once
// Kernels for neural-network layers. Forward ops that backward needs return
// their saved statistics (layer_norm's mean/rstd, max_pool2d's indices).
#include <optional>
#include <string>
#include <tuple>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace trainrun {

// Numerically stable (max-subtracted) along dim; f16/bf16 compute in float.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// Normalizes over the trailing dims `normalized_shape`. Returns
// (output, mean, rstd); mean/rstd have the leading dims and keep the
// normalized ones as size 1.
std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& x, const IntList& normalized_shape,
                                              const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight. Returns (output, rstd).
std::tuple<Tensor, Tensor> rms_norm(const Tensor& x, const IntList& normalized_shape,
                                    const Tensor& weight, double eps = 1e-6);

// Rows of weight picked by integer indices of any shape.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// int64 tensor with a trailing dim of num_classes (-1: max index + 1).
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

// NCHW input, (C_out, C_in/groups, kH, kW) weight, optional bias.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, IntList stride = {1, 1},
              IntList padding = {0, 0}, IntList dilation = {1, 1}, int64_t groups = 1);
// The gradients of conv2d's (input, weight, bias) from its output's gradient;
// an entry whose need_* is false comes back undefined (what autograd's
// ConvolutionBackward calls).
std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                                   IntList stride, IntList padding, IntList dilation, int64_t groups,
                                                   bool need_input, bool need_weight, bool need_bias);
// Returns (output, int64 indices into each H*W plane).
std::tuple<Tensor, Tensor> max_pool2d(const Tensor& input, IntList kernel_size, IntList stride = {},
                                      IntList padding = {0, 0}, IntList dilation = {1, 1},
                                      bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, IntList kernel_size, IntList stride = {}, IntList padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);
// The gradient of avg_pool2d's input from its output's gradient (what
// autograd's AvgPool2DBackward calls).
Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& input, IntList kernel_size, IntList stride = {},
                           IntList padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);

// A bool keep-mask: each element kept with probability 1 - p.
Tensor dropout_mask(const IntList& sizes, double p, Generator* gen = nullptr, Device device = Device());
// Returns (x * mask / (1 - p), mask); identity when !train or p == 0.
std::tuple<Tensor, Tensor> dropout(const Tensor& x, double p, bool train = true, Generator* gen = nullptr);

// Negative log-likelihood of log-probabilities (N, C) or (N, C, d...) at
// integer targets. reduction: "mean", "sum" or "none".
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight = {},
                const std::string& reduction = "mean", int64_t ignore_index = -100);
// label_smoothing in [0, 1] mixes the one-hot target with the uniform
// distribution over classes, as torch.nn.functional.cross_entropy does.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

}  // namespace trainrun
