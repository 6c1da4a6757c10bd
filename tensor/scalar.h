#pragma once
// A number passed to an op (alpha, fill value, clamp bound): bool, integer or
// floating. Like a Python number, it takes part in type promotion only by its
// category (see result_type in type_promotion.h).
#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

namespace trainrun {

class Scalar {
 public:
  enum class Kind : int8_t { Bool, Int, Float };
  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT: implicit, like Python numbers
  template <typename T, std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point<T>::value, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}                // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}            // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0 : i_ != 0; }
  // The value converted to T (with T's rounding for 16-bit floats).
  template <typename T> T to() const {
    if constexpr (std::is_same<T, bool>::value) return to_bool();
    else if constexpr (std::is_integral<T>::value) return static_cast<T>(to_int());
    else if (kind_ == Kind::Float) return static_cast<T>(static_cast<opmath_t<T>>(d_));
    else return static_cast<T>(static_cast<opmath_t<T>>(i_));
  }
  // The dtype a tensor built from this scalar alone would get.
  DType dtype() const {
    return kind_ == Kind::Bool ? DType::Bool : kind_ == Kind::Int ? DType::Int64 : DType::Float64;
  }

 private:
  Kind kind_;
  union { int64_t i_; double d_; };
};

}  // namespace trainrun
