// The CPU generator against PyTorch: the Mersenne Twister's known outputs, its state in PyTorch's layout, and
// draws equal to values PyTorch 1.13 printed for torch.manual_seed(0) (torch.rand(3), torch.randn(3), ...).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tensor/cpu/pytorch_cpu_draws.h"
#include "tensor/factories.h"
#include "tensor/generator.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

TEST(MersenneTwister, IsTheStandardEngine) {
  MersenneTwister mt(5489);
  std::mt19937 reference(5489);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(mt.random(), reference()) << i;
  MersenneTwister big(uint64_t{1} << 40 | 7);  // (the engine keeps the seed's low 32 bits)
  std::mt19937 low(7);
  EXPECT_EQ(big.random(), low());
  EXPECT_EQ(big.initial_seed(), uint64_t{1} << 40 | 7);
}

TEST(MersenneTwister, StateRoundTripsInPyTorchsLayout) {
  MersenneTwister mt(0);
  for (int i = 0; i < 4; ++i) mt.random();
  mt.next_double_normal = 0.25;
  const std::vector<uint8_t> state = mt.serialize();
  ASSERT_EQ(state.size(), 5056u);
  int32_t left, seeded;
  uint64_t next;
  std::memcpy(&left, state.data() + 8, 4);
  std::memcpy(&seeded, state.data() + 12, 4);
  std::memcpy(&next, state.data() + 16, 8);
  EXPECT_EQ(left, 621);  // what torch.get_rng_state() holds after four draws from seed 0
  EXPECT_EQ(seeded, 1);
  EXPECT_EQ(next, 4u);
  std::vector<uint32_t> expected;
  for (int i = 0; i < 700; ++i) expected.push_back(mt.random());
  MersenneTwister copy(123);
  copy.deserialize(state.data(), state.size());
  ASSERT_TRUE(copy.next_double_normal.has_value());
  EXPECT_EQ(*copy.next_double_normal, 0.25);
  for (uint32_t want : expected) ASSERT_EQ(copy.random(), want);
  expect_error<Error>([&] { copy.deserialize(state.data(), 100); }, {"size 5056", "size to be 100"});
}

std::vector<double> drawn(RandomDistribution dist, double a, double b, DType dtype, int64_t n, MersenneTwister& mt,
                          int64_t lo = 0, int64_t hi = -1) {
  if (hi < 0) hi = n;
  std::vector<double> as_double(static_cast<size_t>(hi - lo));
  if (dtype == DType::Float64) {
    draw_pytorch_cpu(mt, DrawRequest{dist, a, b, dtype, n, true}, lo, hi, as_double.data());
    return as_double;
  }
  std::vector<float> values(static_cast<size_t>(hi - lo));
  draw_pytorch_cpu(mt, DrawRequest{dist, a, b, dtype, n, true}, lo, hi, values.data());
  for (size_t i = 0; i < values.size(); ++i) as_double[i] = values[i];
  return as_double;
}

TEST(PyTorchCpuDraws, EqualPyTorchsValuesForTheSameSeed) {
  using D = RandomDistribution;
  MersenneTwister mt(0);
  const auto u = drawn(D::Uniform, 0, 1, DType::Float32, 3, mt);  // torch.rand(3)
  EXPECT_FLOAT_EQ(u[0], 0.49625658988952637f);
  EXPECT_FLOAT_EQ(u[1], 0.7682217955589294f);
  EXPECT_FLOAT_EQ(u[2], 0.08847743272781372f);
  mt.seed_with(0);
  const auto z = drawn(D::Normal, 0, 1, DType::Float32, 3, mt);  // torch.randn(3): the serial path
  EXPECT_NEAR(z[0], 1.5409961, 1e-6);
  EXPECT_NEAR(z[1], -0.2934289, 1e-6);
  EXPECT_NEAR(z[2], -2.1787894, 1e-6);
  mt.seed_with(0);
  const auto blocks = drawn(D::Normal, 0, 1, DType::Float32, 20, mt);  // torch.randn(20): blocks of 16
  EXPECT_NEAR(blocks[0], -1.1258398, 1e-6);
  EXPECT_NEAR(blocks[1], -1.1523602, 1e-6);
  EXPECT_NEAR(blocks[2], -0.25057858, 1e-6);
  mt.seed_with(0);
  const auto wide = drawn(D::Normal, 0, 1, DType::Float64, 16, mt);  // torch.randn(16, dtype=torch.float64)
  EXPECT_NEAR(wide[0], -2.3104118, 1e-7);
  EXPECT_NEAR(wide[1], -0.37325086, 1e-7);
  mt.seed_with(0);
  const auto ints = drawn(D::RandInt, 0, 10, DType::Float32, 4, mt);  // torch.randint(0, 10, (4,))
  EXPECT_EQ(ints, (std::vector<double>{4, 9, 3, 0}));
  mt.seed_with(0);
  const auto coins = drawn(D::Bernoulli, 0.5, 0, DType::Float32, 6, mt);  // torch.empty(6).bernoulli_(0.5)
  EXPECT_EQ(coins, (std::vector<double>{0, 0, 1, 0, 0, 0}));
  mt.seed_with(0);
  std::vector<int64_t> order(5);
  permutation_pytorch_cpu(mt, 5, order.data());  // torch.randperm(5)
  EXPECT_EQ(order, (std::vector<int64_t>{4, 0, 1, 3, 2}));
}

TEST(PyTorchCpuDraws, APieceIsThatPartOfTheWholeDrawAndTheEngineMovesPastItAll) {
  using D = RandomDistribution;
  for (int64_t n : {7, 16, 37, 100}) {
    MersenneTwister whole_engine(3), piece_engine(3);
    const auto whole = drawn(D::Normal, 1, 2, DType::Float32, n, whole_engine);
    const auto piece = drawn(D::Normal, 1, 2, DType::Float32, n, piece_engine, n / 3, n - 2);
    for (int64_t i = n / 3; i < n - 2; ++i)
      ASSERT_EQ(piece[static_cast<size_t>(i - n / 3)], whole[static_cast<size_t>(i)]);
    EXPECT_EQ(piece_engine.random(), whole_engine.random()) << n;
  }
}

TEST(PyTorchCpuDraws, StridedTensorsAreDrawnInMemoryOrder) {
  // PyTorch fills a transposed tensor in memory order: its transpose holds the values a contiguous draw gives.
  manual_seed(0);
  Tensor contiguous = randn({3, 4});
  manual_seed(0);
  Tensor transposed = empty({4, 3}).t();
  normal_(transposed, 0, 1);
  EXPECT_EQ(values(contiguous), values(transposed.t().contiguous()));
  EXPECT_NE(values(contiguous), values(transposed.contiguous()));
}

}  // namespace
}  // namespace trainrun
