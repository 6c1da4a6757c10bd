// Autograd kernels of the elementwise ops: the forward runs below autograd,
// the backward is a formula in the same (differentiable) ops, so that
// create_graph gives double backward for free.
#include <optional>

#include "autograd/functions/record.h"
#include "tensor/op_schemas.h"
#include "tensor/ops.h"

namespace trainrun {
namespace {

using UnarySig = ops::exp::Sig;
using BinarySig = ops::mul::Sig;
using AlphaSig = ops::add::Sig;

// `below` is the op's own handle; the kernel runs it with Autograd excluded.
Tensor unary(const Op<UnarySig>& below, const char* node, const Tensor& x, const Tensor& out, bool save_x,
             bool save_result, std::function<Tensor(const Tensor& g, const TensorList& saved)> dx) {
  return record_out(
      node, out, {x}, save_x ? TensorList{x} : TensorList{}, save_result,
      [&](const TensorList& in, const Tensor& o) { return below.call(keys_of(in[0], o), in[0], o); },
      [dx, x_dtype = x.dtype()](const Tensor& g, const TensorList& saved) -> TensorList {
        return {cast_to(dx(g, saved), x_dtype)};
      });
}

// The formula body is the variadic tail (it may contain commas).
#define TR_UNARY_AUTOGRAD(name, node, save_x, save_result, ...)                       \
  Tensor name##_autograd(const Tensor& x, const Tensor& out) {                        \
    static const auto& below = ops::name::handle();                                   \
    return unary(below, node, x, out, save_x, save_result,                            \
                 [](const Tensor& g, const TensorList& s) -> Tensor { __VA_ARGS__ }); \
  }                                                                                   \
  OpKernel<ops::name> reg_##name(DispatchKey::Autograd, &name##_autograd);

// s[0] is x when saved, then the result.
TR_UNARY_AUTOGRAD(neg, "NegBackward", false, false, return neg(g);)
TR_UNARY_AUTOGRAD(exp, "ExpBackward", false, true, return mul(g, s[0]);)
TR_UNARY_AUTOGRAD(log, "LogBackward", true, false, return div(g, s[0]);)
TR_UNARY_AUTOGRAD(log1p, "Log1pBackward", true, false, return div(g, add(s[0], 1));)
TR_UNARY_AUTOGRAD(sqrt, "SqrtBackward", false, true, return div(g, mul(s[0], 2));)
TR_UNARY_AUTOGRAD(rsqrt, "RsqrtBackward", false, true, return mul(g, mul(pow(s[0], 3), -0.5));)
TR_UNARY_AUTOGRAD(sin, "SinBackward", true, false, return mul(g, cos(s[0]));)
TR_UNARY_AUTOGRAD(cos, "CosBackward", true, false, return neg(mul(g, sin(s[0])));)
TR_UNARY_AUTOGRAD(tanh, "TanhBackward", false, true, return mul(g, rsub_one(mul(s[0], s[0])));)
TR_UNARY_AUTOGRAD(sigmoid, "SigmoidBackward", false, true, return mul(g, mul(s[0], rsub_one(s[0])));)
TR_UNARY_AUTOGRAD(relu, "ReluBackward", false, true, return mul(g, gt(s[0], 0).to(g.dtype()));)
TR_UNARY_AUTOGRAD(abs, "AbsBackward", true, false, return mul(g, sign(s[0]));)
TR_UNARY_AUTOGRAD(silu, "SiluBackward", true, false, {
  Tensor sg = sigmoid(s[0]);
  return mul(g, mul(sg, add(mul(s[0], rsub_one(sg)), 1)));
})
// Piecewise-constant ops: the gradient is zero almost everywhere (PyTorch's
// convention), and still flows as zeros so that the graph stays connected.
TR_UNARY_AUTOGRAD(floor, "FloorBackward", false, false, return zeros_like(g);)
TR_UNARY_AUTOGRAD(round, "RoundBackward", false, false, return zeros_like(g);)
TR_UNARY_AUTOGRAD(sign, "SignBackward", false, false, return zeros_like(g);)
TR_UNARY_AUTOGRAD(erf, "ErfBackward", true, false,
                  return mul(g, mul(exp(neg(mul(s[0], s[0]))), 1.1283791670955126));)  // 2/sqrt(pi)

// Binary ops: each input's gradient is summed back to its own shape.
Tensor add_sub_autograd(const Op<AlphaSig>& below, bool subtract, const Tensor& a, const Tensor& b, const Scalar& alpha,
                        const Tensor& out) {
  const double scale = (subtract ? -1.0 : 1.0) * alpha.to_double();
  IntList as = a.sizes(), bs = b.sizes();
  DType ad = a.dtype(), bd = b.dtype();
  return record_out(
      subtract ? "SubBackward" : "AddBackward", out, {a, b}, {}, false,
      [&](const TensorList& in, const Tensor& o) {
        return below.call(keys_of(in[0], in[1], o), in[0], in[1], alpha, o);
      },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        Tensor ga = sum_to(g, as), gb = sum_to(scale == 1.0 ? g : mul(g, scale), bs);
        return {cast_to(ga, ad), cast_to(gb, bd)};
      });
}
Tensor add_autograd(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  static const auto& below = ops::add::handle();
  return add_sub_autograd(below, false, a, b, alpha, out);
}
Tensor sub_autograd(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  static const auto& below = ops::sub::handle();
  return add_sub_autograd(below, true, a, b, alpha, out);
}
OpKernel<ops::add> reg_add(DispatchKey::Autograd, &add_autograd);
OpKernel<ops::sub> reg_sub(DispatchKey::Autograd, &sub_autograd);

// save: what the formula reads (default: both inputs); an undefined entry is not kept.
Tensor binary(const Op<BinarySig>& below, const char* node, const Tensor& a, const Tensor& b, const Tensor& out,
              bool save_result, std::function<TensorList(const Tensor& g, const TensorList& saved)> formula,
              std::optional<TensorList> save = std::nullopt) {
  IntList as = a.sizes(), bs = b.sizes();
  DType ad = a.dtype(), bd = b.dtype();
  return record_out(
      node, out, {a, b}, save ? *save : TensorList{a, b}, save_result,
      [&](const TensorList& in, const Tensor& o) { return below.call(keys_of(in[0], in[1], o), in[0], in[1], o); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        TensorList r = formula(g, s);
        Tensor ga = r[0].defined() ? sum_to(r[0], as) : r[0], gb = r[1].defined() ? sum_to(r[1], bs) : r[1];
        return {cast_to(ga, ad), cast_to(gb, bd)};
      });
}

// mul and div keep only what the gradients that will be asked for read: x * 0.5 (a constant) keeps nothing of x,
// so x may be written in place afterwards (x[1] = x[1] * 2), and the activation is not held for backward.
Tensor mul_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  static const auto& below = ops::mul::handle();
  const TensorList save{requires_grad(b) ? a : Tensor(), requires_grad(a) ? b : Tensor()};
  return binary(
      below, "MulBackward", a, b, out, false,
      [](const Tensor& g, const TensorList& s) -> TensorList {
        return {s[1].defined() ? mul(g, s[1]) : Tensor(), s[0].defined() ? mul(g, s[0]) : Tensor()};
      },
      save);
}
Tensor div_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  static const auto& below = ops::div::handle();
  const TensorList save{requires_grad(b) ? a : Tensor(), b};
  return binary(
      below, "DivBackward", a, b, out, false,
      [](const Tensor& g, const TensorList& s) -> TensorList {
        Tensor ga = div(g, s[1]);
        return {ga, s[0].defined() ? neg(mul(ga, div(s[0], s[1]))) : Tensor()};
      },
      save);
}
Tensor pow_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  const bool exponent_needs_grad = requires_grad(b);  // x^2 and friends skip the log
  static const auto& below = ops::pow::handle();
  return binary(below, "PowBackward", a, b, out, true,
                [exponent_needs_grad](const Tensor& g, const TensorList& s) -> TensorList {
                  const Tensor &x = s[0], &p = s[1], &r = s[2];
                  // d/dx x^p = p x^(p-1); d/dp x^p = x^p log x (0 where x == 0, as PyTorch).
                  Tensor gx = mul(g, mul(p, pow(x, sub(p, 1))));
                  Tensor gp = exponent_needs_grad ? mul(g, where(eq(x, 0), zeros_like(r), mul(r, log(x)))) : Tensor();
                  return {gx, gp};
                });
}
Tensor maximum_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  static const auto& below = ops::maximum::handle();
  return binary(below, "MaximumBackward", a, b, out, false, [](const Tensor& g, const TensorList& s) -> TensorList {
    // Ties split the gradient evenly, as PyTorch does.
    Tensor a_wins = add(gt(s[0], s[1]).to(g.dtype()), mul(eq(s[0], s[1]).to(g.dtype()), 0.5));
    return {mul(g, a_wins), mul(g, rsub_one(a_wins))};
  });
}
Tensor minimum_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  static const auto& below = ops::minimum::handle();
  return binary(below, "MinimumBackward", a, b, out, false, [](const Tensor& g, const TensorList& s) -> TensorList {
    Tensor a_wins = add(lt(s[0], s[1]).to(g.dtype()), mul(eq(s[0], s[1]).to(g.dtype()), 0.5));
    return {mul(g, a_wins), mul(g, rsub_one(a_wins))};
  });
}
// where(cond, a, b): the gradient goes to whichever side was chosen.
Tensor where_autograd(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  static const auto& op = ops::where::handle();
  IntList as = a.sizes(), bs = b.sizes();
  DType ad = a.dtype(), bd = b.dtype();
  return record_out(
      "WhereBackward", out, {Tensor(), a, b}, {cond}, false,
      [&](const TensorList& in, const Tensor& o) {
        return op.call(keys_of(cond, in[1], in[2], o), cond, in[1], in[2], o);
      },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        Tensor zero = zeros_like(g);
        return {Tensor(), cast_to(sum_to(where(s[0], g, zero), as), ad), cast_to(sum_to(where(s[0], zero, g), bs), bd)};
      });
}
OpKernel<ops::where> reg_where(DispatchKey::Autograd, &where_autograd);

// remainder(a, b) = a - floor(a / b) * b.
Tensor remainder_autograd(const Tensor& a, const Tensor& b, const Tensor& out) {
  static const auto& below = ops::remainder::handle();
  return binary(below, "RemainderBackward", a, b, out, false, [](const Tensor& g, const TensorList& s) -> TensorList {
    return {g, neg(mul(g, div(s[0], s[1], "floor")))};
  });
}
OpKernel<ops::remainder> reg_remainder(DispatchKey::Autograd, &remainder_autograd);

// Rounded division is piecewise constant: zero gradients, as in PyTorch.
Tensor div_rounding_autograd(const Tensor& a, const Tensor& b, const std::string& mode, const Tensor& out) {
  static const auto& below = ops::div_rounding::handle();
  IntList as = a.sizes(), bs = b.sizes();
  DType ad = a.dtype(), bd = b.dtype();
  return record_out(
      "DivBackward", out, {a, b}, {}, false,
      [&](const TensorList& in, const Tensor& o) {
        return below.call(keys_of(in[0], in[1], o), in[0], in[1], mode, o);
      },
      [=](const Tensor& g, const TensorList&) -> TensorList {
        return {zeros(as, TensorOptions(ad, g.device())), zeros(bs, TensorOptions(bd, g.device()))};
      });
}
OpKernel<ops::div_rounding> reg_div_rounding(DispatchKey::Autograd, &div_rounding_autograd);

// addcmul: self + value * t1 * t2; addcdiv: self + value * t1 / t2.
using AddcSig = ops::addcmul::Sig;
Tensor addc_autograd(bool divide, const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
                     const Tensor& out) {
  static const auto& mul_op = ops::addcmul::handle();
  static const auto& div_op = ops::addcdiv::handle();
  const Op<AddcSig>& below = divide ? div_op : mul_op;
  IntList ss = self.sizes(), s1 = t1.sizes(), s2 = t2.sizes();
  DType sd = self.dtype(), d1 = t1.dtype(), d2 = t2.dtype();
  const double v = value.to_double();
  return record_out(
      divide ? "AddcdivBackward" : "AddcmulBackward", out, {self, t1, t2}, {t1, t2}, false,
      [&](const TensorList& in, const Tensor& o) {
        return below.call(keys_of(in[0], in[1], in[2], o), in[0], in[1], in[2], value, o);
      },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &a = s[0], &b = s[1];
        Tensor gv = mul(g, v);
        Tensor g1 = divide ? div(gv, b) : mul(gv, b);
        Tensor g2 = divide ? neg(mul(gv, div(a, mul(b, b)))) : mul(gv, a);
        return {cast_to(sum_to(g, ss), sd), cast_to(sum_to(g1, s1), d1), cast_to(sum_to(g2, s2), d2)};
      });
}
Tensor addcmul_autograd(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
                        const Tensor& out) {
  return addc_autograd(false, self, t1, t2, value, out);
}
Tensor addcdiv_autograd(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
                        const Tensor& out) {
  return addc_autograd(true, self, t1, t2, value, out);
}
OpKernel<ops::addcmul> reg_addcmul(DispatchKey::Autograd, &addcmul_autograd);
OpKernel<ops::addcdiv> reg_addcdiv(DispatchKey::Autograd, &addcdiv_autograd);

// lerp(a, b, w) = a + w (b - a).
Tensor lerp_autograd(const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& out) {
  static const auto& below = ops::lerp::handle();
  IntList as = a.sizes(), bs = b.sizes(), ws = w.sizes();
  DType ad = a.dtype(), bd = b.dtype(), wd = w.dtype();
  return record_out(
      "LerpBackward", out, {a, b, w}, {a, b, w}, false,
      [&](const TensorList& in, const Tensor& o) {
        return below.call(keys_of(in[0], in[1], in[2], o), in[0], in[1], in[2], o);
      },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        const Tensor &x = s[0], &y = s[1], &weight = s[2];
        Tensor gb = mul(g, weight);
        return {cast_to(sum_to(sub(g, gb), as), ad), cast_to(sum_to(gb, bs), bd),
                cast_to(sum_to(mul(g, sub(y, x)), ws), wd)};
      });
}
OpKernel<ops::lerp> reg_lerp(DispatchKey::Autograd, &lerp_autograd);

// clamp: the gradient passes where min <= x <= max (bounds included, as PyTorch).
Tensor clamp_autograd(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi,
                      const Tensor& out) {
  static const auto& below = ops::clamp::handle();
  DType xd = x.dtype();
  return record_out(
      "ClampBackward", out, {x}, {x}, false,
      [&](const TensorList& in, const Tensor& o) { return below.call(keys_of(in[0], o), in[0], lo, hi, o); },
      [=](const Tensor& g, const TensorList& s) -> TensorList {
        Tensor pass = ones_like(s[0], DType::Bool);
        if (lo) pass = logical_and(pass, ge(s[0], *lo));
        if (hi) pass = logical_and(pass, le(s[0], *hi));
        return {cast_to(where(pass, g, zeros_like(g)), xd)};
      });
}
OpKernel<ops::clamp> reg_clamp(DispatchKey::Autograd, &clamp_autograd);

OpKernel<ops::mul> reg_mul(DispatchKey::Autograd, &mul_autograd);
OpKernel<ops::div> reg_div(DispatchKey::Autograd, &div_autograd);
OpKernel<ops::pow> reg_pow(DispatchKey::Autograd, &pow_autograd);
OpKernel<ops::maximum> reg_maximum(DispatchKey::Autograd, &maximum_autograd);
OpKernel<ops::minimum> reg_minimum(DispatchKey::Autograd, &minimum_autograd);

}  // namespace
}  // namespace trainrun
