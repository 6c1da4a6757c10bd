// CPU kernels of the unary elementwise ops. float32 runs of the
// transcendental ops go through SLEEF (vec_math.h); everything else is a
// plain loop the compiler vectorizes.
#include <cmath>
#include <optional>
#include <string>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/vec_math.h"
#include "tensor/dispatcher.h"

namespace trainrun {
namespace {

enum class U {
  Exp, Log, Log1p, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Erf, Silu, GeluErf, GeluTanh,  // float results
  Neg, Abs, Relu, Sign, Floor, Round,                                                // same dtype
  LogicalNot, BitwiseNot,
};

constexpr bool float_result(U op) { return op <= U::GeluTanh; }

template <U op, typename T>
inline T apply(T x) {
  constexpr double kSqrt1_2 = 0.70710678118654752440;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  if constexpr (op == U::Exp) return std::exp(x);
  else if constexpr (op == U::Log) return std::log(x);
  else if constexpr (op == U::Log1p) return std::log1p(x);
  else if constexpr (op == U::Sqrt) return std::sqrt(x);
  else if constexpr (op == U::Rsqrt) return T(1) / std::sqrt(x);
  else if constexpr (op == U::Sin) return std::sin(x);
  else if constexpr (op == U::Cos) return std::cos(x);
  else if constexpr (op == U::Tanh) return std::tanh(x);
  else if constexpr (op == U::Sigmoid) return T(1) / (T(1) + std::exp(-x));
  else if constexpr (op == U::Erf) return std::erf(x);
  else if constexpr (op == U::Silu) return x / (T(1) + std::exp(-x));
  else if constexpr (op == U::GeluErf) return T(0.5) * x * (T(1) + std::erf(x * T(kSqrt1_2)));
  else if constexpr (op == U::GeluTanh)
    return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
  else if constexpr (op == U::Neg) return -x;
  else if constexpr (op == U::Abs) { if constexpr (std::is_unsigned<T>::value) return x; else return x < 0 ? -x : x; }
  else if constexpr (op == U::Relu) return x > T(0) ? x : (x != x ? x : T(0));  // NaN passes through
  else if constexpr (op == U::Sign) return static_cast<T>((T(0) < x) - (x < T(0)));
  else if constexpr (op == U::Floor) { if constexpr (std::is_floating_point<T>::value) return std::floor(x); else return x; }
  else if constexpr (op == U::Round) { if constexpr (std::is_floating_point<T>::value) return std::nearbyint(x); else return x; }
  else if constexpr (op == U::BitwiseNot) { if constexpr (std::is_same<T, bool>::value) return !x; else return static_cast<T>(~x); }
  else return x;
}

// float32 contiguous runs through SLEEF, in blocks so out may alias in.
template <U op>
bool vectorized_f32(const float* a, float* o, int64_t n) {
  constexpr int64_t kBlock = 256;
  float buf[kBlock];
  switch (op) {
    case U::Exp: vec::exp(a, o, n); return true;
    case U::Log: vec::log(a, o, n); return true;
    case U::Log1p: vec::log1p(a, o, n); return true;
    case U::Sin: vec::sin(a, o, n); return true;
    case U::Cos: vec::cos(a, o, n); return true;
    case U::Tanh: vec::tanh(a, o, n); return true;
    case U::Erf: vec::erf(a, o, n); return true;
    case U::Sigmoid: case U::Silu: case U::GeluErf: case U::GeluTanh:
      for (int64_t b = 0; b < n; b += kBlock) {
        int64_t m = std::min(kBlock, n - b);
        const float* x = a + b;
        if (op == U::Sigmoid || op == U::Silu) {
          for (int64_t i = 0; i < m; ++i) buf[i] = -x[i];
          vec::exp(buf, buf, m);
          if (op == U::Sigmoid) for (int64_t i = 0; i < m; ++i) o[b + i] = 1.f / (1.f + buf[i]);
          else for (int64_t i = 0; i < m; ++i) o[b + i] = x[i] / (1.f + buf[i]);
        } else if (op == U::GeluErf) {
          for (int64_t i = 0; i < m; ++i) buf[i] = x[i] * 0.70710678118654752440f;
          vec::erf(buf, buf, m);
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

const char* op_name(U op) {
  switch (op) {
    case U::Exp: return "exp"; case U::Log: return "log"; case U::Log1p: return "log1p";
    case U::Sqrt: return "sqrt"; case U::Rsqrt: return "rsqrt"; case U::Sin: return "sin";
    case U::Cos: return "cos"; case U::Tanh: return "tanh"; case U::Sigmoid: return "sigmoid";
    case U::Erf: return "erf"; case U::Silu: return "silu"; case U::GeluErf: return "gelu";
    case U::GeluTanh: return "gelu"; case U::Neg: return "neg"; case U::Abs: return "abs";
    case U::Relu: return "relu"; case U::Sign: return "sign"; case U::Floor: return "floor";
    case U::Round: return "round"; case U::LogicalNot: return "logical_not"; case U::BitwiseNot: return "bitwise_not";
  }
  return "?";
}

template <U op>
Tensor unary_cpu(const Tensor& x, const Tensor& out) {
  IteratorConfig config;
  config.op = op_name(op);
  config.promote_integer_to_float = float_result(op);
  if (op == U::LogicalNot) config.output_dtype = DType::Bool;
  TensorIterator iter(config, out, {x});
  DType dt = iter.compute_dtype();
  if constexpr (op == U::LogicalNot) {
    visit_dtype(dt, config.op, [&](auto tag) {
      using T = decltype(tag);
      unary_kernel<bool, T>(iter, [](opmath_t<T> v) { return !static_cast<bool>(v); });
    });
  } else if constexpr (op == U::BitwiseNot) {
    visit_integral_dtype(dt, config.op, true, [&](auto tag) {
      using T = decltype(tag);
      unary_kernel<T, T>(iter, [](T v) { return apply<op, T>(v); });
    });
  } else if constexpr (float_result(op)) {
    visit_float_dtype(dt, config.op, [&](auto tag) {
      using T = decltype(tag);
      using Acc = opmath_t<T>;
      if constexpr (std::is_same<T, float>::value) {
        iter.for_each([&](char** data, const int64_t* s, int64_t n) {
          if (s[0] == 4 && s[1] == 4 &&
              vectorized_f32<op>(reinterpret_cast<const float*>(data[1]), reinterpret_cast<float*>(data[0]), n))
            return;
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<float*>(data[0] + i * s[0]) = apply<op, float>(*reinterpret_cast<const float*>(data[1] + i * s[1]));
        });
      } else {
        unary_kernel<T, T>(iter, [](Acc v) { return apply<op, Acc>(v); });
      }
    });
  } else {
    TR_CHECK(!(dt == DType::Bool && (op == U::Neg || op == U::Relu || op == U::Sign)), TypeError,
             "{}: not supported for bool tensors{}", config.op, op == U::Neg ? " (use logical_not)" : "");
    visit_dtype(dt, config.op, [&](auto tag) {
      using T = decltype(tag);
      using Acc = opmath_t<T>;
      unary_kernel<T, T>(iter, [](Acc v) { return apply<op, Acc>(v); });
    });
  }
  return iter.output();
}

Tensor gelu_cpu(const Tensor& x, const std::string& approximate, const Tensor& out) {
  TR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be 'none' or 'tanh', got '{}'", approximate);
  return approximate == "none" ? unary_cpu<U::GeluErf>(x, out) : unary_cpu<U::GeluTanh>(x, out);
}

Tensor clamp_cpu(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi, const Tensor& out) {
  TR_CHECK(lo || hi, ValueError, "clamp: at least one of min and max must be given");
  // A float bound on an integer tensor gives a float result, as in PyTorch:
  // promote before building the iterator, so no output is allocated twice.
  bool float_bound = (lo && lo->is_floating()) || (hi && hi->is_floating());
  if (float_bound && !is_floating(x.dtype())) return clamp_cpu(x.to(default_float_dtype()), lo, hi, out);
  IteratorConfig config;
  config.op = "clamp";
  TensorIterator iter(config, out, {x});
  DType dt = iter.compute_dtype();
  visit_numeric_dtype(dt, "clamp", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    const Acc l = has_lo ? static_cast<Acc>(lo->to<T>()) : Acc(0);
    const Acc h = has_hi ? static_cast<Acc>(hi->to<T>()) : Acc(0);
    unary_kernel<T, T>(iter, [=](Acc v) {
      if (v != v) return v;  // NaN stays NaN
      if (has_lo && v < l) v = l;
      if (has_hi && v > h) v = h;
      return v;
    });
  });
  return iter.output();
}

using UnarySig = Tensor(const Tensor&, const Tensor&);
#define TR_REGISTER_UNARY(name, op) \
  KernelRegistration<UnarySig> reg_##name(#name, DispatchKey::CPU, &unary_cpu<U::op>);
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

KernelRegistration<Tensor(const Tensor&, const std::string&, const Tensor&)> reg_gelu("gelu", DispatchKey::CPU, &gelu_cpu);
KernelRegistration<Tensor(const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&, const Tensor&)>
    reg_clamp("clamp", DispatchKey::CPU, &clamp_cpu);

}  // namespace
}  // namespace trainrun
