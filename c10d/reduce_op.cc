#include "c10d/reduce_op.h"

#include <type_traits>

#include "base/error.h"
#include "tensor/dtype_visit.h"

namespace trainrun {
namespace c10d {

std::string ReduceOp::name() const {
  switch (kind) {
    case SUM:
      return "SUM";
    case AVG:
      return "AVG";
    case PRODUCT:
      return "PRODUCT";
    case MIN:
      return "MIN";
    case MAX:
      return "MAX";
    case BAND:
      return "BAND";
    case BOR:
      return "BOR";
    case BXOR:
      return "BXOR";
    case PREMUL_SUM:
      return "PREMUL_SUM";
  }
  return "?";
}

namespace {

// The type arithmetic happens in: float for the half types, else T.
template <typename T>
using Math = std::conditional_t<std::is_same<T, Half>::value || std::is_same<T, BFloat16>::value, float, T>;

template <typename T, typename F>
ReduceFn elementwise(F f) {
  return [f](void* out, const void* a, const void* b, size_t n) {
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) o[i] = static_cast<T>(f(static_cast<Math<T>>(x[i]), static_cast<Math<T>>(y[i])));
  };
}

}  // namespace

ReduceFn reduce_function(ReduceOp op, DType dtype) {
  return visit_dtype(dtype, "reduce", [&](auto tag) -> ReduceFn {
    using T = decltype(tag);
    using M = Math<T>;
    switch (op.kind) {
      case ReduceOp::SUM:
      case ReduceOp::AVG:
      case ReduceOp::PREMUL_SUM:
        if constexpr (std::is_same<T, bool>::value)
          return elementwise<T>([](bool a, bool b) { return a || b; });  // as PyTorch: SUM of bools is OR
        else
          return elementwise<T>([](M a, M b) { return a + b; });
      case ReduceOp::PRODUCT:
        if constexpr (std::is_same<T, bool>::value)
          return elementwise<T>([](bool a, bool b) { return a && b; });
        else
          return elementwise<T>([](M a, M b) { return a * b; });
      case ReduceOp::MIN:
        return elementwise<T>([](M a, M b) { return b < a ? b : a; });
      case ReduceOp::MAX:
        return elementwise<T>([](M a, M b) { return a < b ? b : a; });
      case ReduceOp::BAND:
      case ReduceOp::BOR:
      case ReduceOp::BXOR:
        if constexpr (std::is_integral<T>::value) {
          if (op.kind == ReduceOp::BAND) return elementwise<T>([](M a, M b) { return a & b; });
          if (op.kind == ReduceOp::BOR) return elementwise<T>([](M a, M b) { return a | b; });
          return elementwise<T>([](M a, M b) { return a ^ b; });
        } else {
          throw TypeError(
              fmt::format("ReduceOp.{} needs an integer or bool tensor, got {}", op.name(), dtype_name(dtype)));
        }
    }
    throw ValueError("unknown ReduceOp");
  });
}

}  // namespace c10d
}  // namespace trainrun
