#pragma once
// Value conversion between element types, as PyTorch's static casts do:
// 16-bit floats go through float, anything to bool is "!= 0", and a float to
// uint8 goes through int64 (c10's rule), so -1.0 is 255 on every device
// instead of whatever the hardware's float-to-unsigned conversion does (x86
// wraps, a GPU saturates to 0). CUDA's convert (element_access.h) follows.
#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

namespace trainrun {

template <typename To, typename From>
constexpr To convert(From v) {
  using Mid = opmath_t<From>;
  if constexpr (std::is_same<To, From>::value) {
    return v;
  } else if constexpr (std::is_same<To, bool>::value) {
    return static_cast<Mid>(v) != Mid(0);
  } else if constexpr (std::is_same<To, Half>::value || std::is_same<To, BFloat16>::value) {
    return To(static_cast<float>(static_cast<Mid>(v)));
  } else if constexpr (std::is_same<To, uint8_t>::value && std::is_floating_point<Mid>::value) {
    return static_cast<To>(static_cast<int64_t>(static_cast<Mid>(v)));
  } else {
    return static_cast<To>(static_cast<Mid>(v));
  }
}

}  // namespace trainrun
