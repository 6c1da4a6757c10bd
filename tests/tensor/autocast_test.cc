// Autocast at the dispatcher: the listed ops run in the autocast dtype (CPU:
// matrix products and convolutions only), others keep their inputs' dtype,
// out= calls are left alone, and the state is per thread.
#include <thread>

#include "tensor/autocast.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

class AutocastOn {
 public:
  explicit AutocastOn(DType dtype) { set_autocast_state(DeviceType::CPU, {true, dtype}); }
  ~AutocastOn() { set_autocast_state(DeviceType::CPU, {false, DType::Float32}); }
};

TEST(Autocast, MatrixProductsRunInTheAutocastDtype) {
  Tensor a = ones({2, 3}), b = full({3, 2}, 0.5), v = ones({3});
  AutocastOn on(DType::BFloat16);
  EXPECT_EQ(mm(a, b).dtype(), DType::BFloat16);
  EXPECT_EQ(matmul(a, v).dtype(), DType::BFloat16);
  EXPECT_EQ(addmm(zeros({2, 2}), a, b, 1, 1).dtype(), DType::BFloat16);
  EXPECT_VALUES(mm(a, b), 1.5, 1.5, 1.5, 1.5);
  // A bfloat16 activation times a float32 weight: cast, not refused.
  EXPECT_EQ(mm(a.to(DType::BFloat16), b).dtype(), DType::BFloat16);
  // Other ops keep their dtype; so do the CPU's float32-safe ones (PyTorch's CPU lists).
  EXPECT_EQ(add(a, a).dtype(), DType::Float32);
  EXPECT_EQ(softmax(a, 1).dtype(), DType::Float32);
  // out= is not autocast: the result goes where it was asked.
  Tensor out = zeros({2, 2});
  mm_out(out, a, b);
  EXPECT_EQ(out.dtype(), DType::Float32);
  EXPECT_VALUES(out, 1.5, 1.5, 1.5, 1.5);
}

TEST(Autocast, IsPerThreadAndOffByDefault) {
  Tensor a = ones({2, 2});
  EXPECT_EQ(mm(a, a).dtype(), DType::Float32);
  AutocastOn on(DType::Float16);
  EXPECT_EQ(mm(a, a).dtype(), DType::Float16);
  DType elsewhere = DType::Bool;
  std::thread([&] { elsewhere = mm(a, a).dtype(); }).join();
  EXPECT_EQ(elsewhere, DType::Float32);
  expect_error<ValueError>([&] { mm(ones({2, 3}), ones({2, 3})); }, {"cannot be multiplied"});
}

TEST(Autocast, RefusesANonFloatingDtype) {
  expect_error<TypeError>([] { set_autocast_state(DeviceType::CPU, {true, DType::Int32}); }, {"must be floating"});
}

}  // namespace
}  // namespace trainrun
