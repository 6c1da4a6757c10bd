// Public NN-kernel API. softmax, norms, conv and pools dispatch to device
// kernels; embedding, one_hot, dropout and the losses are composed from
// other ops, so every device gets them for free.
#include "tensor/nn_functional.h"

#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/indexing.h"
#include "tensor/op_schemas.h"
#include "tensor/reductions.h"
#include "tensor/views.h"

namespace trainrun {
namespace {}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return ops::softmax::call(keys_of(x), x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return ops::log_softmax::call(keys_of(x), x, dim); }

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                                              const Tensor& bias, double eps) {
  return ops::layer_norm::call(keys_of(x, weight, bias), x, normalized_shape, weight, bias, eps);
}

std::tuple<Tensor, Tensor> rms_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight, double eps) {
  auto r = ops::rms_norm::call(keys_of(x, weight), x, normalized_shape, weight, Tensor(), eps);
  return {std::get<0>(r), std::get<2>(r)};
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  TR_CHECK(weight.dim() == 2, ValueError, "embedding: weight must be 2-D (num_embeddings, dim), got shape {}",
           weight.shape_str());
  IntList shape = indices.sizes();
  shape.push_back(weight.size(1));
  return reshape(index_select(weight, 0, reshape(indices, {-1})), shape);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  TR_CHECK(indices.dtype() == DType::Int64, TypeError, "one_hot: expected int64 class indices, got {}",
           dtype_name(indices.dtype()));
  if (num_classes < 0) {
    TR_CHECK(indices.numel() > 0, ValueError, "one_hot: cannot infer num_classes from an empty tensor");
    num_classes = max(indices).item<int64_t>() + 1;
  }
  if (indices.numel() > 0) {
    int64_t lo = min(indices).item<int64_t>(), hi = max(indices).item<int64_t>();
    TR_CHECK(lo >= 0 && hi < num_classes, IndexError, "one_hot: class values must be in [0, {}), got min {} max {}",
             num_classes, lo, hi);
  }
  IntList shape = indices.sizes();
  shape.push_back(num_classes);
  return scatter(zeros(shape, TensorOptions(DType::Int64, indices.device())), -1, unsqueeze(indices, -1), 1);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride, IntList padding,
              IntList dilation, int64_t groups) {
  return ops::conv2d::call(keys_of(input, weight, bias), input, weight, bias, stride, padding, dilation, groups);
}

std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                                   IntList stride, IntList padding, IntList dilation, int64_t groups,
                                                   bool need_input, bool need_weight, bool need_bias) {
  return ops::conv2d_backward::call(keys_of(grad_output, input, weight), grad_output, input, weight, stride, padding,
                                    dilation, groups, need_input, need_weight, need_bias);
}

std::tuple<Tensor, Tensor> max_pool2d(const Tensor& input, IntList kernel_size, IntList stride, IntList padding,
                                      IntList dilation, bool ceil_mode) {
  return ops::max_pool2d::call(keys_of(input), input, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor avg_pool2d(const Tensor& input, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode,
                  bool count_include_pad) {
  return ops::avg_pool2d::call(keys_of(input), input, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& input, IntList kernel_size, IntList stride,
                           IntList padding, bool ceil_mode, bool count_include_pad) {
  return ops::avg_pool2d_backward::call(keys_of(grad_output, input), grad_output, input, kernel_size, stride, padding,
                                        ceil_mode, count_include_pad);
}

Tensor dropout_mask(const IntList& sizes, double p, Generator* gen, Device device) {
  TR_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability must be in [0, 1], got {}", p);
  Tensor mask = empty(sizes, TensorOptions(DType::Bool, device));
  return bernoulli_(mask, 1 - p, gen);
}

std::tuple<Tensor, Tensor> dropout(const Tensor& x, double p, bool train, Generator* gen) {
  TR_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability must be in [0, 1], got {}", p);
  if (!train || p == 0) return {x, ones(x.sizes(), TensorOptions(DType::Bool, x.device()))};
  Tensor mask = dropout_mask(x.sizes(), p, gen, x.device());
  if (p == 1) return {zeros_like(x), mask};
  return {mul(mul(x, mask), 1.0 / (1.0 - p)), mask};
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, const std::string& reduction,
                int64_t ignore_index) {
  TR_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", ValueError,
           "nll_loss: reduction must be 'mean', 'sum' or 'none', got '{}'", reduction);
  TR_CHECK(target.dtype() == DType::Int64, TypeError, "nll_loss: expected int64 targets, got {}",
           dtype_name(target.dtype()));
  // (C) with a 0-dim target, (N, C) with (N), or (N, C, d...) with (N, d...).
  Tensor lp = log_probs.dim() == 1 ? unsqueeze(log_probs, 0) : log_probs;
  Tensor tg = log_probs.dim() == 1 ? reshape(target, {1}) : target;
  TR_CHECK(lp.dim() >= 2, ValueError, "nll_loss: input of shape {} needs a class dim", log_probs.shape_str());
  const int64_t C = lp.size(1);
  IntList expected_target = {lp.size(0)};
  for (int64_t d = 2; d < lp.dim(); ++d) expected_target.push_back(lp.size(d));
  TR_CHECK(tg.sizes() == expected_target, ValueError, "nll_loss: target shape {} does not match input shape {}",
           target.shape_str(), log_probs.shape_str());
  Tensor valid = ne(tg, ignore_index);
  Tensor safe_target = where(valid, tg, 0);
  if (safe_target.numel() > 0 && !safe_target.device().is_meta()) {  // (meta targets have no values to check)
    int64_t lo = min(safe_target).item<int64_t>(), hi = max(safe_target).item<int64_t>();
    TR_CHECK(lo >= 0 && hi < C, IndexError, "nll_loss: target values must be in [0, {}), got min {} max {}", C, lo, hi);
  }
  Tensor picked = squeeze(gather(lp, 1, unsqueeze(safe_target, 1)), 1);  // shape of target
  Tensor w = weight.defined() ? index_select(weight.to(lp.dtype()), 0, reshape(safe_target, {-1})).view(tg.sizes())
                              : ones(tg.sizes(), TensorOptions(lp.dtype(), lp.device()));
  w = mul(w, valid);
  Tensor losses = neg(mul(picked, w));
  if (reduction == "none") return log_probs.dim() == 1 ? reshape(losses, {}) : losses;
  if (reduction == "sum") return sum(losses);
  return div(sum(losses), sum(w));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  TR_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError,
           "cross_entropy: label_smoothing must be in [0, 1], got {}", label_smoothing);
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  Tensor log_probs = log_softmax(logits, class_dim);
  Tensor nll = nll_loss(log_probs, target, weight, reduction, ignore_index);
  if (label_smoothing == 0) return nll;
  // The uniform part: -sum_c w_c log p_c per sample (ignored samples
  // contribute nothing), reduced like nll_loss, divided by the class count.
  const int64_t classes = logits.size(class_dim);
  Tensor per_class = log_probs;
  if (weight.defined()) {
    IntList shape(logits.dim(), 1);
    shape[class_dim] = classes;
    per_class = mul(log_probs, reshape(weight.to(log_probs.dtype()), shape));
  }
  Tensor smooth = neg(sum(per_class, {class_dim}));  // the target's shape
  Tensor valid = ne(target, ignore_index);
  smooth = mul(smooth, valid.to(smooth.dtype()));
  if (reduction == "sum") {
    smooth = sum(smooth);
  } else if (reduction == "mean") {
    Tensor denom;
    if (weight.defined()) {
      Tensor picked = index_select(weight.to(log_probs.dtype()), 0, reshape(where(valid, target, 0), {-1}));
      denom = sum(mul(picked, reshape(valid, {-1}).to(log_probs.dtype())));
    } else {
      denom = sum(valid.to(log_probs.dtype()));
    }
    smooth = div(sum(smooth), denom);
  }
  return add(mul(nll, 1.0 - label_smoothing), mul(smooth, label_smoothing / static_cast<double>(classes)));
}

}  // namespace trainrun
