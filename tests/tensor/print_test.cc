#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(Print, MatchesPyTorchFormat) {
  EXPECT_EQ(ft({1, 2.5}, {1, 2}).str(), "tensor([[1.0000, 2.5000]])");
  EXPECT_EQ(ft({1, 2, 3, 4}, {2, 2}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(arange(3).str(), "tensor([0, 1, 2])");
  EXPECT_EQ(arange(3, DType::Int32).str(), "tensor([0, 1, 2], dtype=torch.int32)");
  EXPECT_EQ(tensor<bool>({true, false}).str(), "tensor([ True, False])");
  // All False (one element or many): as wide as "False" (a narrower width once made a negative pad).
  EXPECT_EQ(tensor<bool>({false}).str(), "tensor(False)");
  EXPECT_EQ(tensor<bool>({false, false}).str(), "tensor([False, False])");
  EXPECT_EQ(tensor<bool>({true, true}).str(), "tensor([True, True])");
  EXPECT_EQ(scalar_tensor(1.5, DType::Float64).str(), "tensor(1.5000, dtype=torch.float64)");
  EXPECT_EQ(ft({1e-5, 1}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(zeros({0}).str(), "tensor([])");
  EXPECT_EQ(arange(-1, 2).str(), "tensor([-1,  0,  1])");
  std::string big = arange(2000).str();
  EXPECT_EQ(big, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
}

}  // namespace trainrun
