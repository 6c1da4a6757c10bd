// Public elementwise API: functional, out= and in-place forms of each op,
// all going through one dispatched op per name with an optional `out`.
#include "tensor/elementwise.h"

#include <cmath>
#include <limits>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/reductions.h"
#include "tensor/type_promotion.h"

namespace trainrun {
namespace {

// A 0-dim tensor standing for a number: promotes like a Python scalar.
Tensor wrap(const Scalar& s) {
  Tensor t = scalar_tensor(s, s.dtype());
  t.impl()->set_wrapped_number(true);
  return t;
}

Tensor& finish_out(Tensor& out) {
  out.impl()->bump_version();
  return out;
}

}  // namespace

bool is_wrapped_number(const Tensor& t) { return t.impl()->is_wrapped_number(); }
DType result_type(const Tensor& a, const Tensor& b) { return result_type(std::vector<Tensor>{a, b}); }

#define TR_DEFINE_UNARY(name)                                                       \
  Tensor name(const Tensor& x) { return ops::name::call(keys_of(x), x, Tensor()); } \
  Tensor& name##_out(Tensor& out, const Tensor& x) {                                \
    ops::name::call(keys_of(x, out), x, out);                                       \
    return finish_out(out);                                                         \
  }                                                                                 \
  Tensor& name##_(Tensor& x) { return name##_out(x, x); }
TR_DEFINE_UNARY(exp)
TR_DEFINE_UNARY(log)
TR_DEFINE_UNARY(log1p)
TR_DEFINE_UNARY(sqrt)
TR_DEFINE_UNARY(rsqrt)
TR_DEFINE_UNARY(sin)
TR_DEFINE_UNARY(cos)
TR_DEFINE_UNARY(tanh)
TR_DEFINE_UNARY(sigmoid)
TR_DEFINE_UNARY(erf)
TR_DEFINE_UNARY(silu)
TR_DEFINE_UNARY(neg)
TR_DEFINE_UNARY(abs)
TR_DEFINE_UNARY(relu)
TR_DEFINE_UNARY(sign)
TR_DEFINE_UNARY(floor)
TR_DEFINE_UNARY(round)
TR_DEFINE_UNARY(logical_not)
TR_DEFINE_UNARY(bitwise_not)
#undef TR_DEFINE_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  return ops::gelu::call(keys_of(x), x, approximate, Tensor());
}
Tensor gelu_backward(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  return ops::gelu_backward::call(keys_of(grad, x), grad, x, approximate);
}

Tensor gelu_backward_math(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  TR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu_backward: approximate must be 'none' or 'tanh', got '{}'", approximate);
  Tensor d;
  if (approximate == "tanh") {
    // 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx, u = sqrt(2/pi) (x + 0.044715 x^3)
    const double k = std::sqrt(2.0 / M_PI);
    Tensor th = tanh(mul(add(x, mul(pow(x, 3), 0.044715)), k));
    Tensor du = mul(add(mul(mul(x, x), 3 * 0.044715), 1), k);
    d = add(mul(add(th, 1), 0.5), mul(mul(mul(x, 0.5), neg(sub(mul(th, th), 1))), du));
  } else {
    // Phi(x) + x phi(x)
    Tensor cdf = mul(add(erf(mul(x, M_SQRT1_2)), 1), 0.5);
    Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 1.0 / std::sqrt(2 * M_PI));
    d = add(cdf, mul(x, pdf));
  }
  return mul(grad, d);
}

Tensor& gelu_out(Tensor& out, const Tensor& x, const std::string& approximate) {
  ops::gelu::call(keys_of(x, out), x, approximate, out);
  return finish_out(out);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return ops::clamp::call(keys_of(x), x, min, max, Tensor());
}
Tensor& clamp_out(Tensor& out, const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  ops::clamp::call(keys_of(x, out), x, min, max, out);
  return finish_out(out);
}
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) { return clamp_out(x, x, min, max); }

#define TR_DEFINE_BINARY(name)                                                                             \
  Tensor name(const Tensor& a, const Tensor& b) { return ops::name::call(keys_of(a, b), a, b, Tensor()); } \
  Tensor name(const Tensor& a, const Scalar& b) { return name(a, wrap(b)); }                               \
  Tensor& name##_out(Tensor& out, const Tensor& a, const Tensor& b) {                                      \
    ops::name::call(keys_of(a, b, out), a, b, out);                                                        \
    return finish_out(out);                                                                                \
  }                                                                                                        \
  Tensor& name##_(Tensor& a, const Tensor& b) { return name##_out(a, a, b); }                              \
  Tensor& name##_(Tensor& a, const Scalar& b) { return name##_out(a, a, wrap(b)); }
TR_DEFINE_BINARY(mul)
TR_DEFINE_BINARY(div)
TR_DEFINE_BINARY(remainder)
TR_DEFINE_BINARY(pow)
TR_DEFINE_BINARY(maximum)
TR_DEFINE_BINARY(minimum)
TR_DEFINE_BINARY(eq)
TR_DEFINE_BINARY(ne)
TR_DEFINE_BINARY(lt)
TR_DEFINE_BINARY(le)
TR_DEFINE_BINARY(gt)
TR_DEFINE_BINARY(ge)
TR_DEFINE_BINARY(logical_and)
TR_DEFINE_BINARY(logical_or)
TR_DEFINE_BINARY(logical_xor)
TR_DEFINE_BINARY(bitwise_and)
TR_DEFINE_BINARY(bitwise_or)
TR_DEFINE_BINARY(bitwise_xor)
#undef TR_DEFINE_BINARY

#define TR_DEFINE_ALPHA(name)                                                                             \
  Tensor name(const Tensor& a, const Tensor& b, const Scalar& alpha) {                                    \
    return ops::name::call(keys_of(a, b), a, b, alpha, Tensor());                                         \
  }                                                                                                       \
  Tensor name(const Tensor& a, const Scalar& b, const Scalar& alpha) { return name(a, wrap(b), alpha); }  \
  Tensor& name##_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {                \
    ops::name::call(keys_of(a, b, out), a, b, alpha, out);                                                \
    return finish_out(out);                                                                               \
  }                                                                                                       \
  Tensor& name##_(Tensor& a, const Tensor& b, const Scalar& alpha) { return name##_out(a, a, b, alpha); } \
  Tensor& name##_(Tensor& a, const Scalar& b, const Scalar& alpha) { return name##_out(a, a, wrap(b), alpha); }
TR_DEFINE_ALPHA(add)
TR_DEFINE_ALPHA(sub)
#undef TR_DEFINE_ALPHA

Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode) {
  return ops::div_rounding::call(keys_of(a, b), a, b, rounding_mode, Tensor());
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  TR_CHECK(cond.dtype() == DType::Bool, TypeError, "where: condition must be a bool tensor, got {}",
           dtype_name(cond.dtype()));
  return ops::where::call(keys_of(cond, a, b), cond, a, b, Tensor());
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) { return where(cond, a, wrap(b)); }

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight) {
  return ops::lerp::call(keys_of(a, b, weight), a, b, weight, Tensor());
}
Tensor lerp(const Tensor& a, const Tensor& b, const Scalar& weight) { return lerp(a, b, wrap(weight)); }
Tensor& lerp_(Tensor& a, const Tensor& b, const Scalar& weight) {
  ops::lerp::call(keys_of(a, b), a, b, wrap(weight), a);
  return finish_out(a);
}

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return ops::addcmul::call(keys_of(self, t1, t2), self, t1, t2, value, Tensor());
}
Tensor& addcmul_(Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  ops::addcmul::call(keys_of(self, t1, t2), self, t1, t2, value, self);
  return finish_out(self);
}
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return ops::addcdiv::call(keys_of(self, t1, t2), self, t1, t2, value, Tensor());
}
Tensor& addcdiv_(Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  ops::addcdiv::call(keys_of(self, t1, t2), self, t1, t2, value, self);
  return finish_out(self);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

Tensor isclose(const Tensor& a_in, const Tensor& b_in, double rtol, double atol, bool equal_nan) {
  TR_CHECK(rtol >= 0 && atol >= 0, ValueError, "isclose: rtol ({}) and atol ({}) must be non-negative", rtol, atol);
  Tensor a = a_in.to(DType::Float64), b = b_in.to(DType::Float64);
  // Infinities are close only when equal: the error must also be finite.
  Tensor error = abs(a - b);
  Tensor within = logical_and(lt(error, std::numeric_limits<double>::infinity()), le(error, abs(b) * rtol + atol));
  Tensor close = logical_or(eq(a, b), within);
  if (equal_nan) close = logical_or(close, logical_and(ne(a, a), ne(b, b)));
  return close;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }

}  // namespace trainrun
