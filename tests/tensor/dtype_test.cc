#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(element_size(DType::BFloat16), 2);
  EXPECT_EQ(element_size(DType::Int64), 8);
  EXPECT_STREQ(dtype_name(DType::Float16), "float16");
  EXPECT_EQ(dtype_from_name("long"), DType::Int64);
  expect_error<TypeError>([] { dtype_from_name("float8"); }, {"float8"});
}

TEST(DType, PromotionTableMatchesPyTorch) {
  EXPECT_EQ(promote_types(DType::Bool, DType::Int8), DType::Int8);
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float16), DType::Float16);
  EXPECT_EQ(promote_types(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote_types(DType::Float32, DType::Float64), DType::Float64);
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int8), DType::Int16);
  EXPECT_EQ(promote_types(DType::Int16, DType::UInt8), DType::Int16);
  EXPECT_EQ(promote_types(DType::Int16, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Int16, DType::BFloat16), DType::BFloat16);
}

TEST(DType, Int16IsASignedTwoByteInteger) {
  EXPECT_EQ(element_size(DType::Int16), 2);
  EXPECT_STREQ(dtype_name(DType::Int16), "int16");
  EXPECT_EQ(dtype_from_name("short"), DType::Int16);
  EXPECT_TRUE(is_integral(DType::Int16, false) && is_signed(DType::Int16) && !is_floating(DType::Int16));
  // Arithmetic wraps as int16_t does; sums accumulate (and return) in int64, as PyTorch's.
  Tensor t = add(full({2}, 32767, DType::Int16), 1);
  EXPECT_EQ(t.dtype(), DType::Int16);
  EXPECT_EQ(t.data<int16_t>()[0], -32768);
  Tensor s = sum(full({3}, 30000, DType::Int16));
  EXPECT_EQ(s.dtype(), DType::Int64);
  EXPECT_EQ(s.data<int64_t>()[0], 90000);
  EXPECT_EQ(add(ones({2}, DType::UInt8), ones({2}, DType::Int8)).dtype(), DType::Int16);
}

TEST(DType, ResultTypeTreatsNumbersByCategory) {
  Tensor i32 = ones({2}, DType::Int32), f16 = ones({2}, DType::Float16), b = ones({2}, DType::Bool);
  EXPECT_EQ(add(i32, 2).dtype(), DType::Int32);        // int number keeps int32
  EXPECT_EQ(add(i32, 2.5).dtype(), DType::Float32);    // float number -> default float
  EXPECT_EQ(mul(f16, 2.5).dtype(), DType::Float16);    // float16 stays
  EXPECT_EQ(add(b, 1).dtype(), DType::Int64);          // bool + int -> int64
  // A 0-dim tensor only raises the category.
  EXPECT_EQ(add(i32, scalar_tensor(1, DType::Int64)).dtype(), DType::Int32);
  EXPECT_EQ(add(i32, scalar_tensor(1.0, DType::Float64)).dtype(), DType::Float64);
  EXPECT_EQ(add(ones({2}, DType::Float32), ones({2}, DType::Float64)).dtype(), DType::Float64);
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00);  // halfway to 65536 rounds to even = inf
  EXPECT_EQ(Half(65519.0f).bits, 0x7bff);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(Half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: ties to even (1+2^-9).
  EXPECT_EQ(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(Half(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(Half(std::ldexp(1.0f, -26)).bits, 0x0000);  // below half of it: zero
  EXPECT_FLOAT_EQ(static_cast<float>(Half(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
  // Every half converts to float and back unchanged.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Half h;
    h.bits = static_cast<uint16_t>(b);
    float f = h;
    if (std::isnan(f)) continue;
    ASSERT_EQ(Half(f).bits, h.bits) << b;
  }
}

// Contiguous float32 <-> float16 copies go 8 at a time through the CPU's conversion instructions: bit for
// bit Half's own conversion, both ways (a signaling NaN comes back quiet), over every half, and over floats
// at and around every rounding boundary, subnormals, infinities and NaNs, at lengths that leave a tail.
TEST(Half, TensorCopiesConvertAsHalfDoes) {
  std::vector<float> every_half(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) every_half[b] = Half::to_float(static_cast<uint16_t>(b));
  Tensor halves = arange(0x10000, DType::Int64).to(DType::Int32).to(DType::Int16);  // (the bits, as int16)
  Tensor as_half = empty({0x10000}, DType::Float16);
  std::memcpy(as_half.data_ptr(), halves.data_ptr(), 0x10000 * 2);
  Tensor floats = as_half.to(DType::Float32);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float got = floats.data<float>()[b];
    if (std::isnan(every_half[b])) {  // (the instruction quiets a signaling NaN: sign and payload kept)
      ASSERT_TRUE(std::isnan(got)) << b;
      ASSERT_EQ(float_bits(got) | 0x00400000u, float_bits(every_half[b]) | 0x00400000u) << b;
    } else {
      ASSERT_EQ(float_bits(got), float_bits(every_half[b])) << b;
    }
  }
  std::vector<float> probes;
  for (uint32_t b = 0; b < 0x10000; b += 7) {  // each half, its neighbours in float and the midpoints
    const uint32_t f = float_bits(every_half[b]);
    for (int32_t d : {-4097, -4096, -4095, -1, 0, 1, 4095, 4096, 4097}) probes.push_back(bits_float(f + d));
  }
  for (float v : {std::numeric_limits<float>::infinity(), 1e10f, -1e10f, 65520.0f, std::ldexp(1.0f, -25),
                  bits_float(0x7fa00001u), bits_float(0xffc12345u)})
    probes.push_back(v);
  probes.push_back(1.0f);  // (a tail past the last full group of 8)
  Tensor in = empty({static_cast<int64_t>(probes.size())}, DType::Float32);
  std::memcpy(in.data_ptr(), probes.data(), probes.size() * 4);
  Tensor out = in.to(DType::Float16);
  const uint16_t* bits = static_cast<const uint16_t*>(out.data_ptr());
  for (size_t i = 0; i < probes.size(); ++i) ASSERT_EQ(bits[i], Half(probes[i]).bits) << probes[i] << " at " << i;
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_EQ(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
}

TEST(DType, ConversionsThroughTo) {
  Tensor x = ft({1.5f, -2.7f, 3.0f});
  EXPECT_VALUES(x.to(DType::Int32), 1, -2, 3);
  EXPECT_VALUES(x.to(DType::Bool), 1, 1, 1);
  EXPECT_VALUES(x.to(DType::Float16).to(DType::BFloat16), 1.5, -2.703125, 3);
}

}  // namespace trainrun
