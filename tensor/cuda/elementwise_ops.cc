// The CUDA kernels of the elementwise ops, registered under DispatchKey::CUDA:
// the same TensorIterator as the CPU (promotion, broadcasting, out=), with the
// loop on the GPU (kernels/*.cu).
#include <optional>
#include <string>

#include "tensor/cuda/elementwise_launch.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/elementwise_configs.h"
#include "tensor/op_schemas.h"

namespace trainrun::cuda {
namespace {

template <BinaryOp op>
Tensor binary_cuda(const Tensor& a, const Tensor& b, const Tensor& out) {
  const IteratorConfig config = binary_config(op);
  TensorIterator iter(config, out, {a, b});
  const DType dt = iter.compute_dtype();
  if constexpr (op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor)
    TR_CHECK(!is_floating(dt), TypeError, "{}: not supported for floating dtype {}", config.op, dtype_name(dt));
  launch_on_device(iter, config.op, [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_binary(op, dt, args, s);
  });
  return iter.output();
}

Tensor div_rounding_cuda(const Tensor& a, const Tensor& b, const std::string& mode, const Tensor& out) {
  if (mode == "trunc") return binary_cuda<BinaryOp::DivTrunc>(a, b, out);
  if (mode == "floor") return binary_cuda<BinaryOp::DivFloor>(a, b, out);
  throw ValueError(fmt::format("div: rounding_mode must be 'trunc' or 'floor', got '{}'", mode));
}

Tensor add_cuda(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  const IteratorConfig config = plain_config("add");
  TensorIterator iter(config, out, {a, b});
  const DType dt = iter.compute_dtype();
  TR_CHECK(is_floating(dt) || !alpha.is_floating(), TypeError,
           "add: for integral input tensors, alpha must not be a floating point number (got {})", alpha.to_double());
  launch_on_device(iter, "add", [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_add(dt, kernel_scalar(alpha, dt), args, s);
  });
  return iter.output();
}

Tensor sub_cuda(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  TR_CHECK(a.dtype() != DType::Bool && b.dtype() != DType::Bool, TypeError,
           "sub: subtraction of bool tensors is not supported; use logical_xor or bitwise_not");
  Scalar neg = alpha.is_floating() ? Scalar(-alpha.to_double()) : Scalar(-alpha.to_int());
  return add_cuda(a, b, neg, out);
}

template <UnaryOp op>
Tensor unary_cuda(const Tensor& x, const Tensor& out) {
  const IteratorConfig config = unary_config(op);
  TensorIterator iter(config, out, {x});
  const DType dt = iter.compute_dtype();
  TR_CHECK(!(dt == DType::Bool && (op == UnaryOp::Neg || op == UnaryOp::Relu || op == UnaryOp::Sign)), TypeError,
           "{}: not supported for bool tensors{}", config.op, op == UnaryOp::Neg ? " (use logical_not)" : "");
  TR_CHECK(!(op == UnaryOp::BitwiseNot && is_floating(dt)), TypeError, "bitwise_not: not supported for {}",
           dtype_name(dt));
  launch_on_device(iter, config.op, [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_unary(op, dt, args, s);
  });
  return iter.output();
}

Tensor gelu_cuda(const Tensor& x, const std::string& approximate, const Tensor& out) {
  TR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be 'none' or 'tanh', got '{}'", approximate);
  return approximate == "none" ? unary_cuda<UnaryOp::GeluErf>(x, out) : unary_cuda<UnaryOp::GeluTanh>(x, out);
}

Tensor clamp_cuda(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi,
                  const Tensor& out) {
  TR_CHECK(lo || hi, ValueError, "clamp: at least one of min and max must be given");
  bool float_bound = (lo && lo->is_floating()) || (hi && hi->is_floating());
  if (float_bound && !is_floating(x.dtype())) return clamp_cuda(x.to(default_float_dtype()), lo, hi, out);
  const IteratorConfig config = plain_config("clamp");
  TensorIterator iter(config, out, {x});
  const DType dt = iter.compute_dtype();
  TR_CHECK(dt != DType::Bool, TypeError, "clamp: not supported for bool tensors");
  launch_on_device(iter, "clamp", [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_clamp(dt, lo.has_value(), kernel_scalar(lo.value_or(Scalar(0)), dt), hi.has_value(),
                        kernel_scalar(hi.value_or(Scalar(0)), dt), args, s);
  });
  return iter.output();
}

Tensor where_cuda(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const IteratorConfig config = where_config();
  TensorIterator iter(config, out, {cond, a, b});
  const DType dt = iter.compute_dtype();
  launch_on_device(iter, "where", [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_where(dt, args, s);
  });
  return iter.output();
}

#define TR_REGISTER_BINARY(name, op) OpKernel<ops::name> reg_##name(DispatchKey::CUDA, &binary_cuda<BinaryOp::op>);
TR_REGISTER_BINARY(mul, Mul)
TR_REGISTER_BINARY(div, Div)
TR_REGISTER_BINARY(remainder, Remainder)
TR_REGISTER_BINARY(pow, Pow)
TR_REGISTER_BINARY(maximum, Maximum)
TR_REGISTER_BINARY(minimum, Minimum)
TR_REGISTER_BINARY(eq, Eq)
TR_REGISTER_BINARY(ne, Ne)
TR_REGISTER_BINARY(lt, Lt)
TR_REGISTER_BINARY(le, Le)
TR_REGISTER_BINARY(gt, Gt)
TR_REGISTER_BINARY(ge, Ge)
TR_REGISTER_BINARY(logical_and, LogicalAnd)
TR_REGISTER_BINARY(logical_or, LogicalOr)
TR_REGISTER_BINARY(logical_xor, LogicalXor)
TR_REGISTER_BINARY(bitwise_and, BitwiseAnd)
TR_REGISTER_BINARY(bitwise_or, BitwiseOr)
TR_REGISTER_BINARY(bitwise_xor, BitwiseXor)
#undef TR_REGISTER_BINARY
OpKernel<ops::add> reg_add(DispatchKey::CUDA, &add_cuda);
OpKernel<ops::sub> reg_sub(DispatchKey::CUDA, &sub_cuda);
OpKernel<ops::div_rounding> reg_div_rounding(DispatchKey::CUDA, &div_rounding_cuda);

#define TR_REGISTER_UNARY(name, op) OpKernel<ops::name> reg_##name(DispatchKey::CUDA, &unary_cuda<UnaryOp::op>);
TR_REGISTER_UNARY(exp, Exp)
TR_REGISTER_UNARY(log, Log)
TR_REGISTER_UNARY(log1p, Log1p)
TR_REGISTER_UNARY(sqrt, Sqrt)
TR_REGISTER_UNARY(rsqrt, Rsqrt)
TR_REGISTER_UNARY(sin, Sin)
TR_REGISTER_UNARY(cos, Cos)
TR_REGISTER_UNARY(tanh, Tanh)
TR_REGISTER_UNARY(sigmoid, Sigmoid)
TR_REGISTER_UNARY(erf, Erf)
TR_REGISTER_UNARY(silu, Silu)
TR_REGISTER_UNARY(neg, Neg)
TR_REGISTER_UNARY(abs, Abs)
TR_REGISTER_UNARY(relu, Relu)
TR_REGISTER_UNARY(sign, Sign)
TR_REGISTER_UNARY(floor, Floor)
TR_REGISTER_UNARY(round, Round)
TR_REGISTER_UNARY(logical_not, LogicalNot)
TR_REGISTER_UNARY(bitwise_not, BitwiseNot)
#undef TR_REGISTER_UNARY
OpKernel<ops::gelu> reg_gelu(DispatchKey::CUDA, &gelu_cuda);
// The formula's ops, each a CUDA kernel (a fused kernel of its own is left for when it shows in a profile).
Tensor gelu_backward_cuda(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
  return gelu_backward_math(grad, x, approximate);
}
OpKernel<ops::gelu_backward> reg_gelu_backward(DispatchKey::CUDA, &gelu_backward_cuda);
OpKernel<ops::clamp> reg_clamp(DispatchKey::CUDA, &clamp_cuda);
OpKernel<ops::where> reg_where(DispatchKey::CUDA, &where_cuda);

}  // namespace
}  // namespace trainrun::cuda
