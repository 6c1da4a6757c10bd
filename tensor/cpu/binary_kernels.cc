// CPU kernels of the binary elementwise ops (arithmetic, comparison,
// logical, bitwise), all through TensorIterator.
#include <cmath>
#include <string>
#include <type_traits>

#include "tensor/cpu/loops.h"
#include "tensor/dispatcher.h"

namespace trainrun {
namespace {

enum class B {
  Mul, Div, DivTrunc, DivFloor, Remainder, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor, BitwiseAnd, BitwiseOr, BitwiseXor,
};

const char* op_name(B op) {
  static const char* names[] = {"mul", "div", "div", "div", "remainder", "pow", "maximum", "minimum",
                                "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
                                "bitwise_and", "bitwise_or", "bitwise_xor"};
  return names[static_cast<int>(op)];
}

constexpr bool bool_result(B op) { return op >= B::Eq && op <= B::LogicalXor; }

template <typename T>
T int_pow(T base, T exp) {
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

template <typename T>
[[noreturn]] void throw_zero_division(const char* op) {
  throw ValueError(fmt::format("{}: integer division by zero (ZeroDivisionError)", op));
}

// The op on opmath values of T (T is the compute dtype).
template <B op, typename T, typename Acc = opmath_t<T>>
inline auto apply(Acc a, Acc b) {
  constexpr bool is_float = std::is_floating_point<Acc>::value;
  if constexpr (op == B::Mul) { if constexpr (std::is_same<T, bool>::value) return a && b; else return a * b; }
  else if constexpr (op == B::Div) return a / b;
  else if constexpr (op == B::DivTrunc) {
    if constexpr (is_float) return std::trunc(a / b);
    else { if (b == 0) throw_zero_division<T>("div"); return static_cast<Acc>(a / b); }
  } else if constexpr (op == B::DivFloor) {
    if constexpr (is_float) {
      if (b == 0) return a / b;
      Acc mod = std::fmod(a, b), div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
      Acc fl = std::floor(div);
      if (div - fl > Acc(0.5)) fl += 1;
      return div == 0 ? std::copysign(Acc(0), a / b) : fl;
    } else {
      if (b == 0) throw_zero_division<T>("div");
      Acc q = static_cast<Acc>(a / b);
      if ((a % b != 0) && ((a < 0) != (b < 0))) q = static_cast<Acc>(q - 1);
      return q;
    }
  } else if constexpr (op == B::Remainder) {
    if constexpr (is_float) {
      Acc r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      if (b == 0) throw_zero_division<T>("remainder");
      Acc r = static_cast<Acc>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<Acc>(r + b);
      return r;
    }
  } else if constexpr (op == B::Pow) {
    if constexpr (is_float) return std::pow(a, b);
    else if constexpr (std::is_same<Acc, bool>::value) return a || !b;
    else return int_pow<Acc>(a, b);
  } else if constexpr (op == B::Maximum) {
    if constexpr (is_float) { if (a != a || b != b) return a + b; }
    return a > b ? a : b;
  } else if constexpr (op == B::Minimum) {
    if constexpr (is_float) { if (a != a || b != b) return a + b; }
    return a < b ? a : b;
  }
  else if constexpr (op == B::Eq) return a == b;
  else if constexpr (op == B::Ne) return a != b;
  else if constexpr (op == B::Lt) return a < b;
  else if constexpr (op == B::Le) return a <= b;
  else if constexpr (op == B::Gt) return a > b;
  else if constexpr (op == B::Ge) return a >= b;
  else if constexpr (op == B::LogicalAnd) return a != Acc(0) && b != Acc(0);
  else if constexpr (op == B::LogicalOr) return a != Acc(0) || b != Acc(0);
  else if constexpr (op == B::LogicalXor) return (a != Acc(0)) != (b != Acc(0));
  else if constexpr (op == B::BitwiseAnd) return static_cast<Acc>(a & b);
  else if constexpr (op == B::BitwiseOr) return static_cast<Acc>(a | b);
  else return static_cast<Acc>(a ^ b);
}

template <B op>
Tensor binary_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
  IteratorConfig config;
  config.op = op_name(op);
  config.promote_integer_to_float = op == B::Div;
  if (bool_result(op)) config.output_dtype = DType::Bool;
  TensorIterator iter(config, out, {a, b});
  DType dt = iter.compute_dtype();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    using Out = std::conditional_t<bool_result(op), bool, T>;
    binary_kernel<Out, T>(iter, [](Acc x, Acc y) { return apply<op, T>(x, y); });
  };
  if constexpr (op == B::BitwiseAnd || op == B::BitwiseOr || op == B::BitwiseXor) {
    visit_integral_dtype(dt, config.op, true, run);
  } else if constexpr (bool_result(op) || op == B::Mul || op == B::Pow || op == B::Maximum || op == B::Minimum) {
    visit_dtype(dt, config.op, run);
  } else {
    visit_numeric_dtype(dt, config.op, run);
  }
  return iter.output();
}

Tensor div_rounding_cpu(const Tensor& a, const Tensor& b, const std::string& mode, const Tensor& out) {
  if (mode == "trunc") return binary_cpu<B::DivTrunc>(a, b, out);
  if (mode == "floor") return binary_cpu<B::DivFloor>(a, b, out);
  throw ValueError(fmt::format("div: rounding_mode must be 'trunc' or 'floor', got '{}'", mode));
}

// a + alpha * b (sub passes -alpha).
Tensor add_cpu(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  IteratorConfig config;
  config.op = "add";
  TensorIterator iter(config, out, {a, b});
  DType dt = iter.compute_dtype();
  TR_CHECK(is_floating(dt) || !alpha.is_floating(), TypeError,
           "add: for integral input tensors, alpha must not be a floating point number (got {})", alpha.to_double());
  if (dt == DType::Bool) {
    binary_kernel<bool, bool>(iter, [](bool x, bool y) { return x || y; });
    return iter.output();
  }
  visit_numeric_dtype(dt, "add", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    if (alpha.to_double() == 1.0) {
      binary_kernel<T, T>(iter, [](Acc x, Acc y) { return x + y; });
    } else {
      const Acc al = static_cast<Acc>(std::is_floating_point<Acc>::value ? alpha.to_double() : alpha.to_int());
      binary_kernel<T, T>(iter, [al](Acc x, Acc y) { return x + al * y; });
    }
  });
  return iter.output();
}

Tensor sub_cpu(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  TR_CHECK(a.dtype() != DType::Bool && b.dtype() != DType::Bool, TypeError,
           "sub: subtraction of bool tensors is not supported; use logical_xor or bitwise_not");
  Scalar neg = alpha.is_floating() ? Scalar(-alpha.to_double()) : Scalar(-alpha.to_int());
  return add_cpu(a, b, neg, out);
}

using BinarySig = Tensor(const Tensor&, const Tensor&, const Tensor&);
using AlphaSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);
#define TR_REGISTER_BINARY(name, op) \
  KernelRegistration<BinarySig> reg_##name(#name, DispatchKey::CPU, &binary_cpu<B::op>);
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
KernelRegistration<AlphaSig> reg_add("add", DispatchKey::CPU, &add_cpu);
KernelRegistration<AlphaSig> reg_sub("sub", DispatchKey::CPU, &sub_cpu);
KernelRegistration<Tensor(const Tensor&, const Tensor&, const std::string&, const Tensor&)> reg_div_rounding(
    "div.rounding", DispatchKey::CPU, &div_rounding_cpu);

}  // namespace
}  // namespace trainrun
