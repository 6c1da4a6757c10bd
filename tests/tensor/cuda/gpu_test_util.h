#pragma once
// Shared by the GPU test suites: a fixture that skips, printing why, when no
// GPU is usable, and comparisons of a CUDA result with the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tensor/cuda/runtime.h"
#include "tensor/ops.h"

namespace trainrun::cuda {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_available()) GTEST_SKIP() << "needs a GPU: " << unavailable_reason();
  }
};

inline const Device kCuda = Device(DeviceType::CUDA, 0);

// Expects `gpu` (any device) to equal `cpu` in shape, dtype and values, within
// a relative tolerance for floating dtypes (NaNs must match NaNs).
inline void expect_same(const Tensor& gpu, const Tensor& cpu, double rtol = 1e-5, double atol = 1e-6,
                        const std::string& what = "") {
  ASSERT_EQ(gpu.sizes(), cpu.sizes()) << what;
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  Tensor g = contiguous(gpu.cpu().to(DType::Float64)), c = contiguous(cpu.to(DType::Float64));
  const double* pg = g.data<double>();
  const double* pc = c.data<double>();
  int reported = 0;
  for (int64_t i = 0; i < c.numel() && reported < 5; ++i) {
    const bool both_nan = std::isnan(pg[i]) && std::isnan(pc[i]);
    const bool same_inf = std::isinf(pg[i]) && pg[i] == pc[i];
    if (both_nan || same_inf) continue;
    if (!(std::abs(pg[i] - pc[i]) <= atol + rtol * std::abs(pc[i]))) {
      ADD_FAILURE() << what << " at flat index " << i << ": cuda " << pg[i] << " vs cpu " << pc[i];
      ++reported;
    }
  }
}

// Loose tolerances for a dtype's rounding.
inline double rtol_for(DType dt) {
  switch (dt) {
    case DType::Float16: return 2e-3;
    case DType::BFloat16: return 1.6e-2;
    case DType::Float32: return 1e-5;
    default: return 1e-10;
  }
}

}  // namespace trainrun::cuda
