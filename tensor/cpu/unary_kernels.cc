// CPU kernels of the unary elementwise ops and clamp. float32 runs of the
// transcendental ops go through SLEEF (vec_math.h); everything else is a
// plain loop over tensor/elementwise_math.h (the CUDA kernels' math too),
// which the compiler vectorizes.
#include <cmath>
#include <optional>
#include <string>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/vec_math.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/elementwise_configs.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"

namespace trainrun {
namespace {

// float32 contiguous runs through SLEEF, in blocks so out may alias in.
template <UnaryOp op>
bool vectorized_f32(const float* a, float* o, int64_t n) {
  constexpr int64_t kBlock = 256;
  float buf[kBlock];
  switch (op) {
    case UnaryOp::Exp: vec::exp(a, o, n); return true;
    case UnaryOp::Log: vec::log(a, o, n); return true;
    case UnaryOp::Log1p: vec::log1p(a, o, n); return true;
    case UnaryOp::Sin: vec::sin(a, o, n); return true;
    case UnaryOp::Cos: vec::cos(a, o, n); return true;
    case UnaryOp::Tanh: vec::tanh(a, o, n); return true;
    case UnaryOp::Erf: vec::erf(a, o, n); return true;
    case UnaryOp::Sigmoid: case UnaryOp::Silu: case UnaryOp::GeluErf: case UnaryOp::GeluTanh:
      for (int64_t b = 0; b < n; b += kBlock) {
        int64_t m = std::min(kBlock, n - b);
        const float* x = a + b;
        if (op == UnaryOp::Sigmoid || op == UnaryOp::Silu) {
          for (int64_t i = 0; i < m; ++i) buf[i] = -x[i];
          vec::exp(buf, buf, m);
          if (op == UnaryOp::Sigmoid) for (int64_t i = 0; i < m; ++i) o[b + i] = 1.f / (1.f + buf[i]);
          else for (int64_t i = 0; i < m; ++i) o[b + i] = x[i] / (1.f + buf[i]);
        } else if (op == UnaryOp::GeluErf) {
          for (int64_t i = 0; i < m; ++i) buf[i] = x[i] * 0.70710678118654752440f;
          vec::erf_gelu(buf, buf, m);
          for (int64_t i = 0; i < m; ++i) o[b + i] = 0.5f * x[i] * (1.f + buf[i]);
        } else {
          for (int64_t i = 0; i < m; ++i) buf[i] = 0.79788456080286535588f * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
          vec::tanh(buf, buf, m);
          for (int64_t i = 0; i < m; ++i) o[b + i] = 0.5f * x[i] * (1.f + buf[i]);
        }
      }
      return true;
    default: return false;
  }
}

template <UnaryOp op>
Tensor unary_cpu(const Tensor& x, const Tensor& out) {
  const IteratorConfig config = unary_config(op);
  TensorIterator iter(config, out, {x});
  DType dt = iter.compute_dtype();
  if constexpr (op == UnaryOp::LogicalNot) {
    visit_dtype(dt, config.op, [&](auto tag) {
      using T = decltype(tag);
      unary_kernel<bool, T>(iter, [](opmath_t<T> v) { return !static_cast<bool>(v); });
    });
  } else if constexpr (op == UnaryOp::BitwiseNot) {
    visit_integral_dtype(dt, config.op, true, [&](auto tag) {
      using T = decltype(tag);
      unary_kernel<T, T>(iter, [](T v) { return unary_math<op, T>(v); });
    });
  } else if constexpr (unary_float_result(op)) {
    visit_float_dtype(dt, config.op, [&](auto tag) {
      using T = decltype(tag);
      using Acc = opmath_t<T>;
      if constexpr (std::is_same<T, float>::value) {
        iter.for_each([&](char** data, const int64_t* s, int64_t n) {
          if (s[0] == 4 && s[1] == 4 &&
              vectorized_f32<op>(reinterpret_cast<const float*>(data[1]), reinterpret_cast<float*>(data[0]), n))
            return;
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<float*>(data[0] + i * s[0]) = unary_math<op, float>(*reinterpret_cast<const float*>(data[1] + i * s[1]));
        });
      } else {
        unary_kernel<T, T>(iter, [](Acc v) { return unary_math<op, Acc>(v); });
      }
    });
  } else {
    TR_CHECK(!(dt == DType::Bool && (op == UnaryOp::Neg || op == UnaryOp::Relu || op == UnaryOp::Sign)), TypeError,
             "{}: not supported for bool tensors{}", config.op, op == UnaryOp::Neg ? " (use logical_not)" : "");
    visit_dtype(dt, config.op, [&](auto tag) {
      using T = decltype(tag);
      using Acc = opmath_t<T>;
      unary_kernel<T, T>(iter, [](Acc v) { return unary_math<op, Acc>(v); });
    });
  }
  return iter.output();
}

Tensor gelu_cpu(const Tensor& x, const std::string& approximate, const Tensor& out) {
  TR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be 'none' or 'tanh', got '{}'", approximate);
  return approximate == "none" ? unary_cpu<UnaryOp::GeluErf>(x, out) : unary_cpu<UnaryOp::GeluTanh>(x, out);
}

// One vectorized pass for float32 tensors of one shape (GELU's erf, as the forward's); the composite otherwise.
Tensor gelu_backward_cpu(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  if (approximate != "none" || grad.dtype() != DType::Float32 || x.dtype() != DType::Float32 ||
      grad.sizes() != x.sizes() || !grad.is_contiguous() || !x.is_contiguous()) {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);  // (the parts run as plain CPU ops)
    return gelu_backward_math(grad, x, approximate);
  }
  Tensor out = empty(x.sizes(), TensorOptions(DType::Float32, x.device()));
  const float* g = grad.data<float>();
  const float* v = x.data<float>();
  float* o = out.data<float>();
  parallel_for(0, x.numel(), 16384, [&](int64_t begin, int64_t end) {
    vec::gelu_backward(g + begin, v + begin, o + begin, end - begin);
  });
  return out;
}

Tensor clamp_cpu(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi, const Tensor& out) {
  TR_CHECK(lo || hi, ValueError, "clamp: at least one of min and max must be given");
  // A float bound on an integer tensor gives a float result, as in PyTorch:
  // promote before building the iterator, so no output is allocated twice.
  bool float_bound = (lo && lo->is_floating()) || (hi && hi->is_floating());
  if (float_bound && !is_floating(x.dtype())) return clamp_cpu(x.to(default_float_dtype()), lo, hi, out);
  const IteratorConfig config = plain_config("clamp");
  TensorIterator iter(config, out, {x});
  DType dt = iter.compute_dtype();
  visit_numeric_dtype(dt, "clamp", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    const Acc l = has_lo ? static_cast<Acc>(lo->to<T>()) : Acc(0);
    const Acc h = has_hi ? static_cast<Acc>(hi->to<T>()) : Acc(0);
    unary_kernel<T, T>(iter, [=](Acc v) { return clamp_math(v, has_lo, l, has_hi, h); });
  });
  return iter.output();
}

#define TR_REGISTER_UNARY(name, op) OpKernel<ops::name> reg_##name(DispatchKey::CPU, &unary_cpu<UnaryOp::op>);
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

OpKernel<ops::gelu> reg_gelu(DispatchKey::CPU, &gelu_cpu);
OpKernel<ops::gelu_backward> reg_gelu_backward(DispatchKey::CPU, &gelu_backward_cpu);
OpKernel<ops::clamp> reg_clamp(DispatchKey::CPU, &clamp_cpu);

}  // namespace
}  // namespace trainrun
