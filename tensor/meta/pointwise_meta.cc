// Meta kernels of the elementwise ops and the in-place writers: the same
// TensorIterator set-up as the CPU and CUDA kernels (tensor/elementwise_configs.h),
// so broadcasting, promotion and out= give the same shape and dtype, and
// the iterator allocates the result on the meta device; no loop runs.
// In-place writers (copy_, fill_, the random fills, the fused optimizer
// step) have nothing to write and only bump the version, as a write would.
#include <optional>
#include <string>

#include "tensor/dispatcher.h"
#include "tensor/elementwise_configs.h"
#include "tensor/op_schemas.h"

namespace trainrun {
namespace {

Tensor iterate(const IteratorConfig& config, const Tensor& out, std::vector<Tensor> inputs) {
  TensorIterator iter(config, out, std::move(inputs));
  return iter.output();
}

template <UnaryOp op>
Tensor unary_meta(const Tensor& x, const Tensor& out) {
  return iterate(unary_config(op), out, {x});
}

template <BinaryOp op>
Tensor binary_meta(const Tensor& a, const Tensor& b, const Tensor& out) {
  return iterate(binary_config(op), out, {a, b});
}

Tensor gelu_meta(const Tensor& x, const std::string& approximate, const Tensor& out) {
  TR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be 'none' or 'tanh', got '{}'", approximate);
  return unary_meta<UnaryOp::GeluErf>(x, out);
}

Tensor clamp_meta(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi,
                  const Tensor& out) {
  TR_CHECK(lo || hi, ValueError, "clamp: at least one of min and max must be given");
  const bool float_bound = (lo && lo->is_floating()) || (hi && hi->is_floating());
  const Tensor in = float_bound && !is_floating(x.dtype()) ? x.to(default_float_dtype()) : x;
  return iterate(plain_config("clamp"), out, {in});
}

Tensor add_meta(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  (void)alpha;
  return iterate(plain_config("add"), out, {a, b});
}

Tensor sub_meta(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  TR_CHECK(a.dtype() != DType::Bool && b.dtype() != DType::Bool, TypeError,
           "sub: subtraction of bool tensors is not supported; use logical_xor or bitwise_not");
  return add_meta(a, b, alpha, out);
}

Tensor div_rounding_meta(const Tensor& a, const Tensor& b, const std::string& mode, const Tensor& out) {
  TR_CHECK(mode == "trunc" || mode == "floor", ValueError, "div: rounding_mode must be 'trunc' or 'floor', got '{}'",
           mode);
  return binary_meta<BinaryOp::DivTrunc>(a, b, out);
}

Tensor where_meta(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  return iterate(where_config(), out, {cond, a, b});
}

Tensor lerp_meta(const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& out) {
  return iterate(plain_config("lerp"), out, {a, b, weight});
}

template <bool divide>
Tensor addc_meta(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, const Tensor& out) {
  (void)value;
  return iterate(addc_config(divide), out, {self, t1, t2});
}

// copy_'s front has checked that src broadcasts to dst. Copying out of a meta
// tensor into real memory would leave it unwritten: refused.
Tensor& copy_meta(Tensor& dst, const Tensor& src) {
  TR_CHECK(dst.device().is_meta(), Error,
           "copy_: cannot copy out of a meta tensor into a {} tensor: a meta tensor has no data (make the "
           "destination on the meta device, or initialise the {} tensor instead)",
           dst.device().str(), dst.device().str());
  (void)src;
  dst.impl()->bump_version();
  return dst;
}

Tensor& fill_meta(Tensor& x, const Scalar& v) {
  (void)v;
  x.impl()->bump_version();
  return x;
}

void random_fill_meta(Tensor& target, int64_t dist, double a, double b, uint64_t key, uint64_t first) {
  (void)dist, (void)a, (void)b, (void)key, (void)first;
  target.impl()->bump_version();
}

void fused_adam_meta(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                     const AdamStep& step) {
  (void)grad, (void)exp_avg, (void)exp_avg_sq, (void)max_exp_avg_sq, (void)step;
  param.impl()->bump_version();
}

#define TR_REGISTER_UNARY(name, op) OpKernel<ops::name> reg_##name(DispatchKey::Meta, &unary_meta<UnaryOp::op>);
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

#define TR_REGISTER_BINARY(name, op) OpKernel<ops::name> reg_##name(DispatchKey::Meta, &binary_meta<BinaryOp::op>);
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

OpKernel<ops::gelu> reg_gelu(DispatchKey::Meta, &gelu_meta);
// (grad * d: grad's and x's shapes broadcast, their dtypes promoted)
Tensor gelu_backward_meta(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  TR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu_backward: approximate must be 'none' or 'tanh', got '{}'", approximate);
  return binary_meta<BinaryOp::Mul>(grad, x, Tensor());
}
OpKernel<ops::gelu_backward> reg_gelu_backward(DispatchKey::Meta, &gelu_backward_meta);
OpKernel<ops::clamp> reg_clamp(DispatchKey::Meta, &clamp_meta);
OpKernel<ops::add> reg_add(DispatchKey::Meta, &add_meta);
OpKernel<ops::sub> reg_sub(DispatchKey::Meta, &sub_meta);
OpKernel<ops::div_rounding> reg_div_rounding(DispatchKey::Meta, &div_rounding_meta);
OpKernel<ops::where> reg_where(DispatchKey::Meta, &where_meta);
OpKernel<ops::lerp> reg_lerp(DispatchKey::Meta, &lerp_meta);
OpKernel<ops::addcmul> reg_addcmul(DispatchKey::Meta, &addc_meta<false>);
OpKernel<ops::addcdiv> reg_addcdiv(DispatchKey::Meta, &addc_meta<true>);
OpKernel<ops::copy_> reg_copy(DispatchKey::Meta, &copy_meta);
OpKernel<ops::fill_> reg_fill(DispatchKey::Meta, &fill_meta);
OpKernel<ops::random_fill_> reg_random_fill(DispatchKey::Meta, &random_fill_meta);
OpKernel<ops::fused_adam_> reg_fused_adam(DispatchKey::Meta, &fused_adam_meta);

}  // namespace
}  // namespace trainrun
