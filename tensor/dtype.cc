#include "tensor/dtype.h"

#include <atomic>

#include "base/error.h"

namespace trainrun {

int64_t element_size(DType t) {
  switch (t) {
    case DType::Bool: case DType::UInt8: case DType::Int8: return 1;
    case DType::Int16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  throw TypeError(fmt::format("element_size: invalid dtype {}", static_cast<int>(t)));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "invalid";
}

DType dtype_from_name(const std::string& n) {
  if (n == "bool") return DType::Bool;
  if (n == "uint8") return DType::UInt8;
  if (n == "int8") return DType::Int8;
  if (n == "int16" || n == "short") return DType::Int16;
  if (n == "int32" || n == "int") return DType::Int32;
  if (n == "int64" || n == "long") return DType::Int64;
  if (n == "float16" || n == "half") return DType::Float16;
  if (n == "bfloat16") return DType::BFloat16;
  if (n == "float32" || n == "float") return DType::Float32;
  if (n == "float64" || n == "double") return DType::Float64;
  throw TypeError(fmt::format("unknown dtype name '{}'", n));
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

bool is_integral(DType t, bool include_bool) {
  return t == DType::UInt8 || t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64 ||
         (include_bool && t == DType::Bool);
}

bool is_signed(DType t) { return t != DType::Bool && t != DType::UInt8; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  using D = DType;
  constexpr D b1 = D::Bool, u1 = D::UInt8, i1 = D::Int8, i2 = D::Int16, i4 = D::Int32, i8 = D::Int64,
              f2 = D::Float16, bf = D::BFloat16, f4 = D::Float32, f8 = D::Float64;
  // Rows and columns in enum order: b1 u1 i1 i2 i4 i8 f2 bf f4 f8 (PyTorch's table).
  static constexpr D table[kNumDTypes][kNumDTypes] = {
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

bool can_cast(DType from, DType to) {
  // Casting to a lower category (float -> int, int -> bool) is refused.
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

namespace {
std::atomic<DType> g_default_float{DType::Float32};
}
DType default_float_dtype() { return g_default_float.load(); }
void set_default_float_dtype(DType t) {
  TR_CHECK(is_floating(t), TypeError, "set_default_dtype: expected a floating dtype, got {}", dtype_name(t));
  g_default_float.store(t);
}

void throw_unsupported_dtype(const char* op, DType t, const char* allowed) {
  throw TypeError(fmt::format("{}: dtype {} is not supported (expected {})", op, dtype_name(t), allowed));
}

}  // namespace trainrun
