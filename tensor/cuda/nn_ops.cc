// CUDA kernels of softmax / log_softmax, layer_norm / rms_norm, the ternary
// elementwise ops (lerp, addcmul, addcdiv) and the fused Adam step,
// registered under DispatchKey::CUDA with the CPU kernels' checks.
#include <tuple>

#include "tensor/cuda/elementwise_launch.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise_configs.h"
#include "tensor/factories.h"
#include "tensor/fused_optim.h"
#include "tensor/nn_shapes.h"
#include "tensor/op_schemas.h"
#include "tensor/views.h"

namespace trainrun::cuda {
namespace {

template <bool log_output>
Tensor softmax_cuda(const Tensor& x_in, int64_t dim) {
  const char* op = log_output ? "log_softmax" : "softmax";
  Tensor x = is_floating(x_in.dtype()) ? x_in : x_in.to(default_float_dtype());
  if (x.dim() == 0) return log_output ? zeros_like(x) : ones_like(x);
  dim = wrap_dim(dim, x.dim(), op);
  const bool last = dim == x.dim() - 1;
  Tensor rows = contiguous(last ? x : transpose(x, dim, -1));
  Tensor out = empty(rows.sizes(), TensorOptions(x.dtype(), x.device()));
  const int64_t n = rows.size(-1);
  const int64_t nrows = n == 0 ? 0 : rows.numel() / n;
  const int device = x.device().index;
  DeviceGuard guard(device);
  check_launch(
      launch_softmax(x.dtype(), log_output, rows.data_ptr(), out.data_ptr(), nrows, n, current_stream(device).handle()),
      op);
  return last ? out : contiguous(transpose(out, dim, -1));
}

template <bool rms>
std::tuple<Tensor, Tensor, Tensor> norm_cuda(const Tensor& x_in, const IntList& normalized_shape, const Tensor& weight,
                                              const Tensor& bias, double eps) {
  const char* op = rms ? "rms_norm" : "layer_norm";
  const NormShape shape = check_norm(x_in, normalized_shape, weight, bias, op);
  Tensor x = contiguous(x_in);
  const TensorOptions opts(x.dtype(), x.device());
  Tensor out = empty(x.sizes(), opts), mean = empty(shape.stat_shape, opts), rstd = empty(shape.stat_shape, opts);
  Tensor w = weight.defined() ? contiguous(weight.to(x.dtype())) : Tensor();
  Tensor b = bias.defined() ? contiguous(bias.to(x.dtype())) : Tensor();
  const int device = x.device().index;
  DeviceGuard guard(device);
  check_launch(launch_row_norm(x.dtype(), rms, x.data_ptr(), w.defined() ? w.data_ptr() : nullptr,
                               b.defined() ? b.data_ptr() : nullptr, out.data_ptr(), mean.data_ptr(), rstd.data_ptr(),
                               shape.rows, shape.n, eps, current_stream(device).handle()),
               op);
  return {out, mean, rstd};
}

Tensor lerp_cuda(const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& out) {
  const IteratorConfig config = plain_config("lerp");
  TensorIterator iter(config, out, {a, b, weight});
  const DType dt = iter.compute_dtype();
  TR_CHECK(is_floating(dt), TypeError, "lerp: expected floating point tensors, got {}", dtype_name(dt));
  launch_on_device(iter, "lerp", [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_ternary(TernaryOp::Lerp, dt, KernelScalar{}, args, s);
  });
  return iter.output();
}

template <bool divide>
Tensor addc_cuda(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, const Tensor& out) {
  const IteratorConfig config = addc_config(divide);
  TensorIterator iter(config, out, {self, t1, t2});
  const DType dt = iter.compute_dtype();
  TR_CHECK(dt != DType::Bool, TypeError, "{}: not supported for bool tensors", config.op);
  launch_on_device(iter, config.op, [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_ternary(divide ? TernaryOp::Addcdiv : TernaryOp::Addcmul, dt, kernel_scalar(value, dt), args, s);
  });
  return iter.output();
}

void fused_adam_cuda(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                     const AdamStep& a) {
  TR_CHECK(param.dtype() == DType::Float32 || param.dtype() == DType::Float64, TypeError,
           "fused_adam_: {} parameters are not supported; use fused=false", dtype_name(param.dtype()));
  for (const Tensor* t : {&grad, static_cast<const Tensor*>(&exp_avg), static_cast<const Tensor*>(&exp_avg_sq)})
    TR_CHECK(t->is_cuda() && t->device() == param.device() && t->is_contiguous() && t->dtype() == param.dtype() &&
                 t->numel() == param.numel(),
             ValueError, "fused_adam_: every state tensor must match the parameter ({} {} on {}, contiguous)",
             dtype_name(param.dtype()), param.shape_str(), param.device().str());
  const int device = param.device().index;
  DeviceGuard guard(device);
  AdamKernelArgs k{a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.step, a.amsgrad, a.maximize, a.decoupled};
  check_launch(launch_fused_adam(param.dtype(), param.data_ptr(), grad.data_ptr(), exp_avg.data_ptr(),
                                 exp_avg_sq.data_ptr(), a.amsgrad ? max_exp_avg_sq.data_ptr() : nullptr, param.numel(),
                                 k, current_stream(device).handle()),
               "fused_adam_");
  for (Tensor* t : {&param, &exp_avg, &exp_avg_sq}) t->impl()->bump_version();
}

OpKernel<ops::softmax> reg_softmax(DispatchKey::CUDA, &softmax_cuda<false>);
OpKernel<ops::log_softmax> reg_log_softmax(DispatchKey::CUDA, &softmax_cuda<true>);
OpKernel<ops::layer_norm> reg_layer_norm(DispatchKey::CUDA, &norm_cuda<false>);
OpKernel<ops::rms_norm> reg_rms_norm(DispatchKey::CUDA, &norm_cuda<true>);
OpKernel<ops::lerp> reg_lerp(DispatchKey::CUDA, &lerp_cuda);
OpKernel<ops::addcmul> reg_addcmul(DispatchKey::CUDA, &addc_cuda<false>);
OpKernel<ops::addcdiv> reg_addcdiv(DispatchKey::CUDA, &addc_cuda<true>);
OpKernel<ops::fused_adam_> reg_fused_adam(DispatchKey::CUDA, &fused_adam_cuda);

}  // namespace
}  // namespace trainrun::cuda
