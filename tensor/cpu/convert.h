#pragma once
// Value conversion between element types, as PyTorch's static casts do:
// 16-bit floats go through float, anything to bool is "!= 0".
#include <type_traits>

#include "tensor/dtype.h"

namespace trainrun {

template <typename To, typename From>
inline To convert(From v) {
  using Mid = opmath_t<From>;
  if constexpr (std::is_same<To, From>::value) {
    return v;
  } else if constexpr (std::is_same<To, bool>::value) {
    return static_cast<Mid>(v) != Mid(0);
  } else if constexpr (std::is_same<To, Half>::value || std::is_same<To, BFloat16>::value) {
    return To(static_cast<float>(static_cast<Mid>(v)));
  } else {
    return static_cast<To>(static_cast<Mid>(v));
  }
}

}  // namespace trainrun
