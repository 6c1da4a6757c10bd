// CPU kernels of the binary elementwise ops (arithmetic, comparison,
// logical, bitwise), all through TensorIterator; the per-value math is
// tensor/elementwise_math.h, shared with the CUDA kernels.
#include <cmath>
#include <string>
#include <type_traits>

#include "tensor/cpu/loops.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise_configs.h"
#include "tensor/op_schemas.h"

namespace trainrun {
namespace {

template <BinaryOp op>
Tensor binary_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
  const IteratorConfig config = binary_config(op);
  TensorIterator iter(config, out, {a, b});
  DType dt = iter.compute_dtype();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    using Out = std::conditional_t<binary_bool_result(op), bool, T>;
    binary_kernel<Out, T>(iter, [](Acc x, Acc y) {
      if constexpr (binary_integer_division(op) && !std::is_floating_point<Acc>::value) {
        if (y == 0) throw ValueError(fmt::format("{}: integer division by zero (ZeroDivisionError)", op_name(op)));
      }
      return binary_math<op, Acc>(x, y);
    });
  };
  if constexpr (op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor) {
    visit_integral_dtype(dt, config.op, true, run);
  } else if constexpr (binary_bool_result(op) || op == BinaryOp::Mul || op == BinaryOp::Pow ||
                       op == BinaryOp::Maximum || op == BinaryOp::Minimum) {
    visit_dtype(dt, config.op, run);
  } else {
    visit_numeric_dtype(dt, config.op, run);
  }
  return iter.output();
}

Tensor div_rounding_cpu(const Tensor& a, const Tensor& b, const std::string& mode, const Tensor& out) {
  if (mode == "trunc") return binary_cpu<BinaryOp::DivTrunc>(a, b, out);
  if (mode == "floor") return binary_cpu<BinaryOp::DivFloor>(a, b, out);
  throw ValueError(fmt::format("div: rounding_mode must be 'trunc' or 'floor', got '{}'", mode));
}

// a + alpha * b (sub passes -alpha).
Tensor add_cpu(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor& out) {
  const IteratorConfig config = plain_config("add");
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

// pow with a number as the exponent (x.pow(2), x ** 0.5): the exponents PyTorch's kernel turns into cheaper
// ops are computed so (x * x for 2, sqrt for 0.5, ...), as it does; std::pow per element took 8 ns (the
// loss x.pow(2).mean() on [8, 64, 128] spent 0.5 ms in it).
Tensor pow_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (b.dim() != 0 || !b.device().is_cpu()) return binary_cpu<BinaryOp::Pow>(a, b, out);
  const double e = b.item().to_double();
  if (e != 1 && e != 2 && e != 3 && e != 0.5 && e != -0.5 && e != -1 && e != -2)
    return binary_cpu<BinaryOp::Pow>(a, b, out);
  TensorIterator iter(binary_config(BinaryOp::Pow), out, {a, b});
  const DType dt = iter.compute_dtype();
  if (!is_floating(dt)) return binary_cpu<BinaryOp::Pow>(a, b, out);
  visit_float_dtype(dt, "pow", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    if (e == 1) binary_kernel<T, T>(iter, [](Acc x, Acc) { return x; });  // (pow(x, 2)'s backward asks for it)
    else if (e == 2) binary_kernel<T, T>(iter, [](Acc x, Acc) { return x * x; });
    else if (e == 3) binary_kernel<T, T>(iter, [](Acc x, Acc) { return x * x * x; });
    else if (e == 0.5) binary_kernel<T, T>(iter, [](Acc x, Acc) { return std::sqrt(x); });
    else if (e == -0.5) binary_kernel<T, T>(iter, [](Acc x, Acc) { return Acc(1) / std::sqrt(x); });
    else if (e == -1) binary_kernel<T, T>(iter, [](Acc x, Acc) { return Acc(1) / x; });
    else binary_kernel<T, T>(iter, [](Acc x, Acc) { return Acc(1) / (x * x); });
  });
  return iter.output();
}
OpKernel<ops::pow> reg_pow(DispatchKey::CPU, &pow_cpu);

#define TR_REGISTER_BINARY(name, op) OpKernel<ops::name> reg_##name(DispatchKey::CPU, &binary_cpu<BinaryOp::op>);
TR_REGISTER_BINARY(mul, Mul)
TR_REGISTER_BINARY(div, Div)
TR_REGISTER_BINARY(remainder, Remainder)
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
OpKernel<ops::add> reg_add(DispatchKey::CPU, &add_cpu);
OpKernel<ops::sub> reg_sub(DispatchKey::CPU, &sub_cpu);
OpKernel<ops::div_rounding> reg_div_rounding(DispatchKey::CPU, &div_rounding_cpu);

}  // namespace
}  // namespace trainrun
