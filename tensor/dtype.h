#pragma once
// Element types, their sizes and names, and PyTorch's type-promotion rules.
#include <cstdint>
#include <string>

#include "tensor/half.h"

namespace trainrun {

enum class DType : int8_t {
  Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64,
};
constexpr int kNumDTypes = 10;

// Bytes per element.
int64_t element_size(DType t);
// "float32", "int64", ... (PyTorch's names without the "torch." prefix).
const char* dtype_name(DType t);
// Parses dtype_name's output and the short aliases ("float", "long", "half"...).
DType dtype_from_name(const std::string& name);
bool is_floating(DType t);
bool is_integral(DType t, bool include_bool);
bool is_signed(DType t);

// The dtype two tensors of these dtypes promote to (torch.promote_types).
DType promote_types(DType a, DType b);
// torch.can_cast: may a result of `from` be written into a tensor of `to`?
bool can_cast(DType from, DType to);
// torch.get_default_dtype(): the dtype of float factories and float scalars.
DType default_float_dtype();
void set_default_float_dtype(DType t);

// Maps a C++ type to its DType and back.
template <typename T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };

// The type arithmetic on T is carried out in: float for the 16-bit floats.
template <typename T> struct opmath { using type = T; };
template <> struct opmath<Half> { using type = float; };
template <> struct opmath<BFloat16> { using type = float; };
template <typename T> using opmath_t = typename opmath<T>::type;

// Calls f(T{}) with T the C++ type of `t`. The _FLOAT/_INT variants restrict
// the set of types (and so the code instantiated); other dtypes throw a
// TypeError naming `op`.
template <typename F>
decltype(auto) visit_dtype(DType t, const char* op, F&& f);

}  // namespace trainrun

#include "tensor/dtype_visit.h"
