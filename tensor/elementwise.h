#pragma once
// Elementwise ops: each broadcasts its inputs, promotes dtypes as PyTorch
// does, and comes as f(x) (new tensor), f_out(out, x) and f_(x) (in place).
#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace trainrun {

#define TR_DECLARE_UNARY(name)                             \
  Tensor name(const Tensor& x);                            \
  Tensor& name##_out(Tensor& out, const Tensor& x);        \
  Tensor& name##_(Tensor& x);

// Float results (integer inputs are promoted to the default float dtype).
TR_DECLARE_UNARY(exp)
TR_DECLARE_UNARY(log)
TR_DECLARE_UNARY(log1p)
TR_DECLARE_UNARY(sqrt)
TR_DECLARE_UNARY(rsqrt)
TR_DECLARE_UNARY(sin)
TR_DECLARE_UNARY(cos)
TR_DECLARE_UNARY(tanh)
TR_DECLARE_UNARY(sigmoid)
TR_DECLARE_UNARY(erf)
TR_DECLARE_UNARY(silu)
// Same dtype as the input.
TR_DECLARE_UNARY(neg)
TR_DECLARE_UNARY(abs)
TR_DECLARE_UNARY(relu)
TR_DECLARE_UNARY(sign)
TR_DECLARE_UNARY(floor)
TR_DECLARE_UNARY(round)
// Bool result.
TR_DECLARE_UNARY(logical_not)
// Integral and bool only.
TR_DECLARE_UNARY(bitwise_not)
#undef TR_DECLARE_UNARY

// approximate: "none" (erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor& gelu_out(Tensor& out, const Tensor& x, const std::string& approximate = "none");
// grad * gelu'(x) (the op gelu_backward), and the same written with other ops (what a device without a kernel of
// its own runs, and what autograd differentiates for a double backward).
Tensor gelu_backward(const Tensor& grad, const Tensor& x, const std::string& approximate = "none");
Tensor gelu_backward_math(const Tensor& grad, const Tensor& x, const std::string& approximate);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor& clamp_out(Tensor& out, const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

#define TR_DECLARE_BINARY(name)                                               \
  Tensor name(const Tensor& a, const Tensor& b);                              \
  Tensor name(const Tensor& a, const Scalar& b);                              \
  Tensor& name##_out(Tensor& out, const Tensor& a, const Tensor& b);          \
  Tensor& name##_(Tensor& a, const Tensor& b);                                \
  Tensor& name##_(Tensor& a, const Scalar& b);

TR_DECLARE_BINARY(mul)
TR_DECLARE_BINARY(div)  // true division: integer inputs give float results
TR_DECLARE_BINARY(remainder)  // Python's %: the sign of the divisor
TR_DECLARE_BINARY(pow)
TR_DECLARE_BINARY(maximum)
TR_DECLARE_BINARY(minimum)
TR_DECLARE_BINARY(eq)  // comparisons give bool
TR_DECLARE_BINARY(ne)
TR_DECLARE_BINARY(lt)
TR_DECLARE_BINARY(le)
TR_DECLARE_BINARY(gt)
TR_DECLARE_BINARY(ge)
TR_DECLARE_BINARY(logical_and)
TR_DECLARE_BINARY(logical_or)
TR_DECLARE_BINARY(logical_xor)
TR_DECLARE_BINARY(bitwise_and)  // integral and bool only
TR_DECLARE_BINARY(bitwise_or)
TR_DECLARE_BINARY(bitwise_xor)
#undef TR_DECLARE_BINARY

// a + alpha * b and a - alpha * b.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& a, const Scalar& b, const Scalar& alpha = 1);
// Division with rounding: "trunc" or "floor" (torch.div's rounding_mode).
Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode);

// cond ? a : b, broadcasting all three.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
// a + weight * (b - a).
Tensor lerp(const Tensor& a, const Tensor& b, const Scalar& weight);
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight);
Tensor& lerp_(Tensor& a, const Tensor& b, const Scalar& weight);
// self + value * t1 * t2 and self + value * t1 / t2.
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor& addcmul_(Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor& addcdiv_(Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);

// |a - b| <= atol + rtol * |b| elementwise (equal infinities are close; NaN
// only with equal_nan), as torch.isclose; computed in float64. allclose: all.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);

// The dtype an elementwise op on these operands computes in (torch.result_type).
DType result_type(const Tensor& a, const Tensor& b);
// True for a 0-dim tensor made from a C++/Python number by an op overload.
bool is_wrapped_number(const Tensor& t);

}  // namespace trainrun
