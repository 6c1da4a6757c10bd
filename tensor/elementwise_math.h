#pragma once
// The arithmetic of the elementwise ops on one value, shared by the CPU
// kernels (cpu/{binary,unary,ternary}_kernels.cc) and the CUDA ones
// (cuda/kernels/{binary,unary,row}_kernels.cu): both devices compute the same
// thing, and the CPU tests check the math the GPU runs. Values arrive in the
// op's math type (float for float16 and bfloat16). The std:: math functions
// used here have device overloads under nvcc.
#include <cmath>
#include <type_traits>

#include "tensor/host_device.h"

namespace trainrun {

enum class BinaryOp : int {
  Mul, Div, DivTrunc, DivFloor, Remainder, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor, BitwiseAnd, BitwiseOr, BitwiseXor,
};
// Comparisons and logical ops produce bool; the rest the compute dtype.
constexpr bool binary_bool_result(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::LogicalXor; }
// Integer forms of these divide: a zero divisor raises on the CPU.
constexpr bool binary_integer_division(BinaryOp op) {
  return op == BinaryOp::DivTrunc || op == BinaryOp::DivFloor || op == BinaryOp::Remainder;
}

enum class UnaryOp : int {
  Exp, Log, Log1p, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Erf, Silu, GeluErf, GeluTanh,  // float results
  Neg, Abs, Relu, Sign, Floor, Round,                                                // same dtype
  LogicalNot, BitwiseNot,
};
constexpr bool unary_float_result(UnaryOp op) { return op <= UnaryOp::GeluTanh; }

// base ** exp for integers; negative exponents give 0 except for bases 1 and -1.
template <typename T>
TR_HOST_DEVICE inline T int_pow(T base, T exp) {
  if constexpr (std::is_signed<T>::value) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2) ? -1 : 1;
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exp = static_cast<T>(exp >> 1);
  }
  return result;
}

// a op b in math type Acc, with Python's rounding for floor division and
// remainder. An integer division by zero gives 0 here (a device kernel cannot
// raise); the CPU kernels check the divisor first and raise.
template <BinaryOp op, typename Acc>
TR_HOST_DEVICE TR_FORCEINLINE auto binary_math(Acc a, Acc b) {
  constexpr bool is_float = std::is_floating_point<Acc>::value;
  if constexpr (op == BinaryOp::Mul) {
    if constexpr (std::is_same<Acc, bool>::value) return a && b; else return a * b;
  } else if constexpr (op == BinaryOp::Div) {
    return a / b;
  } else if constexpr (op == BinaryOp::DivTrunc) {
    if constexpr (is_float) return std::trunc(a / b);
    else return b == 0 ? Acc(0) : static_cast<Acc>(a / b);
  } else if constexpr (op == BinaryOp::DivFloor) {
    if constexpr (is_float) {
      if (b == 0) return a / b;
      Acc mod = std::fmod(a, b), div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
      Acc fl = std::floor(div);
      if (div - fl > Acc(0.5)) fl += 1;
      return div == 0 ? std::copysign(Acc(0), a / b) : fl;
    } else {
      if (b == 0) return Acc(0);
      Acc q = static_cast<Acc>(a / b);
      if ((a % b != 0) && ((a < 0) != (b < 0))) q = static_cast<Acc>(q - 1);
      return q;
    }
  } else if constexpr (op == BinaryOp::Remainder) {
    if constexpr (is_float) {
      Acc r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      if (b == 0) return Acc(0);
      Acc r = static_cast<Acc>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<Acc>(r + b);
      return r;
    }
  } else if constexpr (op == BinaryOp::Pow) {
    if constexpr (is_float) return std::pow(a, b);
    else if constexpr (std::is_same<Acc, bool>::value) return a || !b;
    else return int_pow<Acc>(a, b);
  } else if constexpr (op == BinaryOp::Maximum) {
    if constexpr (is_float) { if (a != a || b != b) return a + b; }  // NaN wins
    return a > b ? a : b;
  } else if constexpr (op == BinaryOp::Minimum) {
    if constexpr (is_float) { if (a != a || b != b) return a + b; }
    return a < b ? a : b;
  }
  else if constexpr (op == BinaryOp::Eq) return a == b;
  else if constexpr (op == BinaryOp::Ne) return a != b;
  else if constexpr (op == BinaryOp::Lt) return a < b;
  else if constexpr (op == BinaryOp::Le) return a <= b;
  else if constexpr (op == BinaryOp::Gt) return a > b;
  else if constexpr (op == BinaryOp::Ge) return a >= b;
  else if constexpr (op == BinaryOp::LogicalAnd) return a != Acc(0) && b != Acc(0);
  else if constexpr (op == BinaryOp::LogicalOr) return a != Acc(0) || b != Acc(0);
  else if constexpr (op == BinaryOp::LogicalXor) return (a != Acc(0)) != (b != Acc(0));
  else if constexpr (op == BinaryOp::BitwiseAnd) return static_cast<Acc>(a & b);
  else if constexpr (op == BinaryOp::BitwiseOr) return static_cast<Acc>(a | b);
  else return static_cast<Acc>(a ^ b);
}

// op(x) in math type T. LogicalNot is not here: its result is bool, and the
// kernels compute it as x == 0.
template <UnaryOp op, typename T>
TR_HOST_DEVICE TR_FORCEINLINE T unary_math(T x) {
  constexpr double kSqrt1_2 = 0.70710678118654752440;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  if constexpr (op == UnaryOp::Exp) return std::exp(x);
  else if constexpr (op == UnaryOp::Log) return std::log(x);
  else if constexpr (op == UnaryOp::Log1p) return std::log1p(x);
  else if constexpr (op == UnaryOp::Sqrt) return std::sqrt(x);
  else if constexpr (op == UnaryOp::Rsqrt) return T(1) / std::sqrt(x);
  else if constexpr (op == UnaryOp::Sin) return std::sin(x);
  else if constexpr (op == UnaryOp::Cos) return std::cos(x);
  else if constexpr (op == UnaryOp::Tanh) return std::tanh(x);
  else if constexpr (op == UnaryOp::Sigmoid) return T(1) / (T(1) + std::exp(-x));
  else if constexpr (op == UnaryOp::Erf) return std::erf(x);
  else if constexpr (op == UnaryOp::Silu) return x / (T(1) + std::exp(-x));
  else if constexpr (op == UnaryOp::GeluErf) return T(0.5) * x * (T(1) + std::erf(x * T(kSqrt1_2)));
  else if constexpr (op == UnaryOp::GeluTanh)
    return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
  else if constexpr (op == UnaryOp::Neg) return -x;
  else if constexpr (op == UnaryOp::Abs) {
    if constexpr (std::is_unsigned<T>::value || std::is_same<T, bool>::value) return x; else return x < 0 ? -x : x;
  }
  else if constexpr (op == UnaryOp::Relu) return x > T(0) ? x : (x != x ? x : T(0));  // NaN passes through
  else if constexpr (op == UnaryOp::Sign) return static_cast<T>((T(0) < x) - (x < T(0)));
  else if constexpr (op == UnaryOp::Floor) {
    if constexpr (std::is_floating_point<T>::value) return std::floor(x); else return x;
  }
  else if constexpr (op == UnaryOp::Round) {  // half to even, as PyTorch
    if constexpr (std::is_floating_point<T>::value) return std::nearbyint(x); else return x;
  }
  else if constexpr (op == UnaryOp::BitwiseNot) {
    if constexpr (std::is_same<T, bool>::value) return !x; else return static_cast<T>(~x);
  }
  else return x;
}

// clamp(x, lo, hi) with either bound optional; NaN stays NaN.
template <typename T>
TR_HOST_DEVICE inline T clamp_math(T x, bool has_lo, T lo, bool has_hi, T hi) {
  if (x != x) return x;
  if (has_lo && x < lo) x = lo;
  if (has_hi && x > hi) x = hi;
  return x;
}

// a + w * (b - a) in PyTorch's form, exact at w = 0 and w = 1.
template <typename T>
TR_HOST_DEVICE inline T lerp_math(T a, T b, T w) {
  return (w < T(0.5) && w > T(-0.5)) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
}

}  // namespace trainrun
