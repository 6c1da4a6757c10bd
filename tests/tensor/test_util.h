#pragma once
// Helpers shared by the tensor tests.
#include <gtest/gtest.h>

#include <vector>

#include "tensor/ops.h"
#include "tests/expect_error.h"

namespace trainrun {

// The values of t (any dtype, any strides) as doubles, row-major.
inline std::vector<double> values(const Tensor& t) {
  Tensor c = contiguous(t.to(DType::Float64));
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

inline Tensor ft(const std::vector<float>& v, IntList sizes = {}) { return tensor<float>(v, sizes); }
inline Tensor it(const std::vector<int64_t>& v, IntList sizes = {}) { return tensor<int64_t>(v, sizes); }

#define EXPECT_VALUES(t, ...) EXPECT_EQ(::trainrun::values(t), (std::vector<double>{__VA_ARGS__}))

inline void expect_close(const Tensor& a, const std::vector<double>& b, double tol = 1e-5) {
  auto va = values(a);
  ASSERT_EQ(va.size(), b.size());
  for (size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(va[i], b[i], tol * (1 + std::abs(b[i]))) << "at flat index " << i;
}

}  // namespace trainrun
