#pragma once
// Implementation of the dtype visitors declared in dtype.h.
#include "base/error.h"

namespace trainrun {

[[noreturn]] void throw_unsupported_dtype(const char* op, DType t, const char* allowed);

template <typename F>
decltype(auto) visit_dtype(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Bool: return f(bool{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  throw_unsupported_dtype(op, t, "any");
}

// Floating dtypes only.
template <typename F>
decltype(auto) visit_float_dtype(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  throw_unsupported_dtype(op, t, "floating point");
}

// Integer dtypes (and bool when the op accepts it: callers say so).
template <typename F>
decltype(auto) visit_integral_dtype(DType t, const char* op, bool with_bool, F&& f) {
  switch (t) {
    case DType::Bool: if (with_bool) return f(bool{}); break;
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    default: break;
  }
  throw_unsupported_dtype(op, t, with_bool ? "integral or bool" : "integral");
}

// Every dtype except bool (arithmetic ops).
template <typename F>
decltype(auto) visit_numeric_dtype(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  throw_unsupported_dtype(op, t, "numeric (not bool)");
}

}  // namespace trainrun
