// Autograd kernels of the NN building blocks: softmax, log_softmax, gelu,
// the norms, pooling and conv2d.
#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions/record.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

Tensor softmax_autograd(const Tensor& x, int64_t dim) {
  static const auto& op = ops::softmax::handle();
  DType xd = x.dtype();
  return record(
      "SoftmaxBackward", {x}, {}, true, [&] { return op.call(keys_of(x), x, dim); },
      [dim, xd](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor& y = s[0];  // dx = y * (g - sum(g * y))
        return {cast_to(mul(y, sub(g, sum(mul(g, y), {dim}, true))), xd)};
      });
}
Tensor log_softmax_autograd(const Tensor& x, int64_t dim) {
  static const auto& op = ops::log_softmax::handle();
  DType xd = x.dtype();
  return record(
      "LogSoftmaxBackward", {x}, {}, true, [&] { return op.call(keys_of(x), x, dim); },
      [dim, xd](const Tensor& g, const TensorList& s) -> TensorList {
        return {cast_to(sub(g, mul(exp(s[0]), sum(g, {dim}, true))), xd)};  // dx = g - softmax * sum(g)
      });
}
OpKernel<ops::softmax> reg_softmax(DispatchKey::Autograd, &softmax_autograd);
OpKernel<ops::log_softmax> reg_log_softmax(DispatchKey::Autograd, &log_softmax_autograd);

Tensor gelu_autograd(const Tensor& x, const std::string& approximate, const Tensor& out) {
  static const auto& op = ops::gelu::handle();
  return record_out(
      "GeluBackward", out, {x}, {x}, false,
      [&](const TensorList& in, const Tensor& o) { return op.call(keys_of(in[0], o), in[0], approximate, o); },
      [approximate](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor& v = s[0];
        return {cast_to(gelu_backward(g, v, approximate), v.dtype())};  // (its autograd kernel: double backward)
      });
}
OpKernel<ops::gelu> reg_gelu(DispatchKey::Autograd, &gelu_autograd);

// gelu_backward under a graph (create_graph=True): the formula's ops, which autograd differentiates; otherwise
// the op's one-pass kernel.
Tensor gelu_backward_autograd(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  if (GradMode::is_enabled() && any_requires_grad({grad, x})) return gelu_backward_math(grad, x, approximate);
  ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
  return ops::gelu_backward::call(keys_of(grad, x), grad, x, approximate);
}
OpKernel<ops::gelu_backward> reg_gelu_backward(DispatchKey::Autograd, &gelu_backward_autograd);

using NormSig = ops::layer_norm::Sig;

// mean over dims (kept) / sum over dims (dropped); x itself when dims is
// empty (in our API empty dims would mean all of them).
Tensor mean_or_self(const Tensor& x, const IntList& dims) { return dims.empty() ? x : mean(x, dims, true); }
Tensor sum_or_self(const Tensor& x, const IntList& dims) { return dims.empty() ? x : sum(x, dims, false); }

// layer_norm and rms_norm: y = x_hat * w + b, x_hat = (x - mean) * rstd
// (rms: mean = 0). The statistics come back from the forward (broadcastable
// shapes), so backward does not recompute them.
template <bool rms>
std::tuple<Tensor, Tensor, Tensor> norm_autograd(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                                                 const Tensor& bias, double eps) {
  static Op<NormSig> op(rms ? "rms_norm" : "layer_norm");
  std::tuple<Tensor, Tensor, Tensor> r;
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    r = op.call(keys_of(x, weight, bias), x, normalized_shape, weight, bias, eps);
  }
  if (!GradMode::is_enabled() || !any_requires_grad({x, weight, bias})) return r;
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  IntList norm_dims, outer_dims;
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? outer_dims : norm_dims).push_back(d);
  const bool has_w = weight.defined(), has_b = bias.defined();
  auto node = std::make_shared<FormulaNode>(
      rms ? "RmsNormBackward" : "LayerNormBackward",
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &xs = s[0], &w = s[1], &mean = s[2], &rstd = s[3];
        Tensor x_hat = rms ? mul(xs, rstd) : mul(sub(xs, mean), rstd);
        Tensor dx_hat = has_w ? mul(g, w) : g;
        Tensor inner = mean_or_self(mul(dx_hat, x_hat), norm_dims);
        Tensor dx = rms ? mul(rstd, sub(dx_hat, mul(x_hat, inner)))
                        : mul(rstd, sub(sub(dx_hat, mean_or_self(dx_hat, norm_dims)), mul(x_hat, inner)));
        Tensor dw = has_w ? sum_or_self(mul(g, x_hat), outer_dims) : Tensor();
        Tensor db = has_b ? sum_or_self(g, outer_dims) : Tensor();
        return {cast_to(dx, xs.dtype()), has_w ? cast_to(dw, w.dtype()) : dw, db};
      });
  node->set_next_edges({gradient_edge(x), weight.defined() ? gradient_edge(weight) : Edge{},
                        bias.defined() ? gradient_edge(bias) : Edge{}});
  node->save(x, false);
  node->save(weight, false);
  // The statistics are not differentiable outputs: saved like inputs. (So
  // double backward through a norm is first-order only in them.)
  node->save(std::get<1>(r), false);
  node->save(std::get<2>(r), false);
  set_history(std::get<0>(r), node);
  return r;
}
OpKernel<ops::layer_norm> reg_layer_norm(DispatchKey::Autograd, &norm_autograd<false>);
OpKernel<ops::rms_norm> reg_rms_norm(DispatchKey::Autograd, &norm_autograd<true>);

// max_pool2d: each output's gradient goes to the input element that won
// (the forward's indices are flat positions within each H x W plane).
std::tuple<Tensor, Tensor> max_pool2d_autograd(const Tensor& x, const IntList& kernel, const IntList& stride,
                                                const IntList& padding, const IntList& dilation, bool ceil_mode) {
  static const auto& op = ops::max_pool2d::handle();
  std::tuple<Tensor, Tensor> r;
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    r = op.call(keys_of(x), x, kernel, stride, padding, dilation, ceil_mode);
  }
  if (!GradMode::is_enabled() || !requires_grad(x)) return r;
  IntList shape = x.sizes();
  DType xd = x.dtype();
  auto node = std::make_shared<FormulaNode>("MaxPool2DBackward", [shape, xd](const Tensor& g, const TensorList& s) {
    const Tensor& idx = s[0];
    const int64_t planes_dim = static_cast<int64_t>(shape.size()) - 2;
    IntList plane_shape(shape.begin(), shape.begin() + planes_dim);
    IntList flat_in = plane_shape, flat_out = plane_shape;
    flat_in.push_back(shape[planes_dim] * shape[planes_dim + 1]);
    flat_out.push_back(-1);
    Tensor gi = scatter_add(zeros(flat_in, TensorOptions(g.dtype(), g.device())), planes_dim, reshape(idx, flat_out), reshape(g, flat_out));
    return TensorList{cast_to(reshape(gi, shape), xd)};
  });
  node->set_next_edges({gradient_edge(x)});
  node->save(std::get<1>(r), false);
  set_history(std::get<0>(r), node);
  return r;
}
OpKernel<ops::max_pool2d> reg_max_pool2d(DispatchKey::Autograd, &max_pool2d_autograd);

Tensor avg_pool2d_autograd(const Tensor& x, const IntList& kernel, const IntList& stride, const IntList& padding,
                           bool ceil_mode, bool count_include_pad) {
  static const auto& op = ops::avg_pool2d::handle();
  return record(
      "AvgPool2DBackward", {x}, {x}, false,
      [&] { return op.call(keys_of(x), x, kernel, stride, padding, ceil_mode, count_include_pad); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        return {avg_pool2d_backward(g, s[0], kernel, stride, padding, ceil_mode, count_include_pad)};
      });
}
OpKernel<ops::avg_pool2d> reg_avg_pool2d(DispatchKey::Autograd, &avg_pool2d_autograd);

// avg_pool2d_backward is linear in grad_output (input only gives the shape),
// so its own gradient is the forward pooling: this makes double backward
// through avg_pool2d work.
Tensor avg_pool2d_backward_autograd(const Tensor& grad_output, const Tensor& input, const IntList& kernel,
                                    const IntList& stride, const IntList& padding, bool ceil_mode,
                                    bool count_include_pad) {
  static const auto& op = ops::avg_pool2d_backward::handle();
  DType gd = grad_output.dtype();
  return record(
      "AvgPool2DBackwardBackward", {grad_output, Tensor()}, {}, false,
      [&] {
        return op.call(keys_of(grad_output, input), grad_output, input, kernel, stride, padding, ceil_mode,
                       count_include_pad);
      },
      [=](const Tensor& gg, const TensorList&) -> TensorList {
        return {cast_to(avg_pool2d(gg, kernel, stride, padding, ceil_mode, count_include_pad), gd), Tensor()};
      });
}
OpKernel<ops::avg_pool2d_backward> reg_avg_pool2d_backward(DispatchKey::Autograd, &avg_pool2d_backward_autograd);

// conv2d: conv2d_backward computes only the gradients the graph needs.
Tensor conv2d_autograd(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
                       const IntList& padding, const IntList& dilation, int64_t groups) {
  static const auto& op = ops::conv2d::handle();
  const bool need_input = requires_grad(input), need_weight = requires_grad(weight),
             need_bias = bias.defined() && requires_grad(bias);
  return record(
      "ConvolutionBackward", {input, weight, bias}, {input, weight}, false,
      [&] { return op.call(keys_of(input, weight, bias), input, weight, bias, stride, padding, dilation, groups); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        auto [gi, gw, gb] = conv2d_backward(
            g, s[0], s[1], stride, padding, dilation, groups, need_input && autograd::needs_input_grad(0),
            need_weight && autograd::needs_input_grad(1), need_bias && autograd::needs_input_grad(2));
        return {gi, gw, gb};
      });
}
OpKernel<ops::conv2d> reg_conv2d(DispatchKey::Autograd, &conv2d_autograd);

// conv2d_backward's own gradient (double backward through a convolution).
// Its outputs are linear maps: grad_input is the adjoint of the convolution
// in x applied to gy (so its adjoint in gy is the convolution with w), and
// grad_weight the adjoint in w (adjoint in gy: the convolution of x). With
// gi = Dx(gy, w) and gw = Dw(x, gy), and ggi, ggw, ggb their gradients:
//   d/dgy = conv2d(ggi, w) + conv2d(x, ggw) + ggb
//   d/dx  = Dx(gy, ggw)      d/dw = Dw(ggi, gy)
std::tuple<Tensor, Tensor, Tensor> conv2d_backward_autograd(const Tensor& gy, const Tensor& x, const Tensor& w,
                                                            const IntList& stride, const IntList& padding,
                                                            const IntList& dilation, int64_t groups, bool need_input,
                                                            bool need_weight, bool need_bias) {
  static const auto& op = ops::conv2d_backward::handle();
  TensorList r = record_multi(
      "ConvolutionBackwardBackward", {gy, x, w}, {gy, x, w},
      [&] {
        auto [gi, gw, gb] = op.call(keys_of(gy, x, w), gy, x, w, stride, padding, dilation, groups, need_input,
                                    need_weight, need_bias);
        return TensorList{gi, gw, gb};
      },
      [=](const TensorList& gg, const TensorList& s) -> TensorList {
        const Tensor &dy = s[0], &input = s[1], &weight = s[2];
        const Tensor &ggi = gg[0], &ggw = gg.size() > 1 ? gg[1] : Tensor(), &ggb = gg.size() > 2 ? gg[2] : Tensor();
        Tensor d_gy, d_x, d_w;
        if (ggi.defined()) {
          d_gy = conv2d(ggi, weight, Tensor(), stride, padding, dilation, groups);
          d_w = std::get<1>(conv2d_backward(dy, ggi, weight, stride, padding, dilation, groups, false, true, false));
        }
        if (ggw.defined()) {
          Tensor t = conv2d(input, ggw, Tensor(), stride, padding, dilation, groups);
          d_gy = d_gy.defined() ? add(d_gy, t) : t;
          d_x = std::get<0>(conv2d_backward(dy, input, ggw, stride, padding, dilation, groups, true, false, false));
        }
        if (ggb.defined()) {
          IntList bshape(dy.dim(), 1);
          bshape[dy.dim() - 3] = ggb.size(0);
          Tensor t = expand(reshape(ggb, bshape), dy.sizes());
          d_gy = d_gy.defined() ? add(d_gy, t) : t;
        }
        return {d_gy, d_x, d_w};
      });
  return {r[0], r[1], r[2]};
}
OpKernel<ops::conv2d_backward> reg_conv2d_backward(DispatchKey::Autograd, &conv2d_backward_autograd);

}  // namespace
}  // namespace trainrun
