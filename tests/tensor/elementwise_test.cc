#include <cmath>
#include <limits>

#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(Elementwise, BroadcastingAndAlpha) {
  Tensor a = arange(6, DType::Float32).view({2, 3});
  Tensor b = ft({10, 20, 30});
  EXPECT_VALUES(add(a, b), 10, 21, 32, 13, 24, 35);
  EXPECT_VALUES(sub(a, b, 2), -20, -39, -58, -17, -36, -55);
  Tensor col = ft({1, 2}, {2, 1});
  EXPECT_VALUES(mul(col, b), 10, 20, 30, 20, 40, 60);
  expect_error<ValueError>([&] { add(a, ft({1, 2})); }, {"add", "[2, 3]", "[2]", "dim 1"});
  expect_error<TypeError>([&] { add(it({1, 2}), it({1, 2}), 0.5); }, {"alpha"});
}

TEST(Elementwise, NonContiguousInputsAndOutputs) {
  Tensor a = arange(12, DType::Float64).view({3, 4}).t();  // [4, 3]
  Tensor b = arange(4, DType::Float64).view({4, 1});
  Tensor r = add(a, b);
  EXPECT_VALUES(r.select(0, 1), 2, 6, 10);
  Tensor out = zeros({3, 4}, DType::Float64).t();
  add_out(out, a, b);
  EXPECT_EQ(values(out), values(r));
  Tensor strided = arange(20, DType::Float32).slice(0, 0, 20, 2);
  EXPECT_VALUES(mul(strided, 2).slice(0, 0, 3), 0, 4, 8);
}

TEST(Elementwise, InPlaceAndOutChecks) {
  Tensor a = ft({1, 2, 3});
  add_(a, ft({1, 1, 1}));
  EXPECT_VALUES(a, 2, 3, 4);
  mul_(a, 2);
  EXPECT_VALUES(a, 4, 6, 8);
  Tensor i = it({1, 2});
  expect_error<TypeError>([&] { div_(i, 2); }, {"div", "float32", "int64"});
  expect_error<ValueError>([&] { Tensor s = ft({1}); add_(s, ft({1, 2})); }, {"add", "out="});
  Tensor out_f64 = zeros({3}, DType::Float64);
  add_out(out_f64, ft({1, 2, 3}), ft({0.5, 0.5, 0.5}));
  EXPECT_VALUES(out_f64, 1.5, 2.5, 3.5);
  Tensor h = ones({3}, DType::Float16);
  mul_(h, ft({0.5, 0.25, 3}));  // f32 result cast back into f16
  EXPECT_VALUES(h, 0.5, 0.25, 3);
}

TEST(Elementwise, DivisionModesAndRemainder) {
  Tensor a = it({7, -7, 7, -7}), b = it({2, 2, -2, -2});
  EXPECT_VALUES(div(a, b), 3.5, -3.5, -3.5, 3.5);
  EXPECT_EQ(div(a, b).dtype(), DType::Float32);
  EXPECT_VALUES(div(a, b, "trunc"), 3, -3, -3, 3);
  EXPECT_VALUES(div(a, b, "floor"), 3, -4, -4, 3);
  EXPECT_VALUES(remainder(a, b), 1, 1, -1, -1);
  EXPECT_VALUES(remainder(ft({5.5, -5.5}), 2), 1.5, 0.5);
  expect_error<ValueError>([&] { div(a, it({0, 1, 1, 1}), "floor"); }, {"division by zero"});
  expect_error<ValueError>([&] { div(a, b, "round"); }, {"rounding_mode", "round"});
}

TEST(Elementwise, UnaryMathMatchesLibm) {
  Tensor x = linspace(-3, 3, 1001);  // long enough to take the vector path plus a tail
  auto xs = values(x);
  struct Case { Tensor (*f)(const Tensor&); double (*ref)(double); double tol; };
  Case cases[] = {
      {exp, [](double v) { return std::exp(v); }, 2e-7},
      {sin, [](double v) { return std::sin(v); }, 2e-7},
      {cos, [](double v) { return std::cos(v); }, 2e-7},
      {tanh, [](double v) { return std::tanh(v); }, 2e-7},
      {erf, [](double v) { return std::erf(v); }, 2e-7},
      {sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, 2e-7},
      {silu, [](double v) { return v / (1 + std::exp(-v)); }, 4e-7},
      {abs, [](double v) { return std::abs(v); }, 0},
      {relu, [](double v) { return v > 0 ? v : 0; }, 0},
  };
  for (const Case& c : cases) {
    auto got = values(c.f(x));
    for (size_t i = 0; i < xs.size(); ++i) ASSERT_NEAR(got[i], c.ref(xs[i]), c.tol * (1 + std::abs(c.ref(xs[i])))) << xs[i];
  }
  Tensor pos = linspace(0.01, 5, 333);
  auto ps = values(pos);
  auto lg = values(log(pos)), sq = values(sqrt(pos)), rs = values(rsqrt(pos)), l1 = values(log1p(pos));
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_NEAR(lg[i], std::log(ps[i]), 1e-6);
    EXPECT_NEAR(sq[i], std::sqrt(ps[i]), 1e-6);
    EXPECT_NEAR(rs[i], 1 / std::sqrt(ps[i]), 1e-5);
    EXPECT_NEAR(l1[i], std::log1p(ps[i]), 1e-6);
  }
}

TEST(Elementwise, GeluClampSignRound) {
  Tensor x = ft({-2, -0.5, 0, 0.5, 2});
  expect_close(gelu(x), {-0.0455003, -0.1542687, 0, 0.3457313, 1.9544997});
  expect_close(gelu(x, "tanh"), {-0.0454023, -0.1542860, 0, 0.3457140, 1.9545977});
  expect_error<ValueError>([&] { gelu(x, "fast"); }, {"approximate", "fast"});
  EXPECT_VALUES(clamp(x, -1, 1), -1, -0.5, 0, 0.5, 1);
  EXPECT_VALUES(clamp(x, std::nullopt, 0), -2, -0.5, 0, 0, 0);
  EXPECT_EQ(clamp(it({1, 5}), 0.5, 2.5).dtype(), DType::Float32);
  EXPECT_VALUES(sign(x), -1, -1, 0, 1, 1);
  EXPECT_VALUES(round(ft({0.5, 1.5, 2.5, -0.5})), 0, 2, 2, -0);
  EXPECT_VALUES(floor(ft({1.7, -1.2})), 1, -2);
  expect_close(exp(it({0, 1})), {1, std::exp(1.0)}, 1e-6);
}

TEST(Elementwise, NaNPropagates) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = tensor<double>({1, nan});
  EXPECT_TRUE(std::isnan(values(maximum(x, tensor<double>({0, 0})))[1]));
  EXPECT_TRUE(std::isnan(values(minimum(x, tensor<double>({0, 0})))[1]));
  EXPECT_TRUE(std::isnan(values(relu(x))[1]));
  EXPECT_TRUE(std::isnan(values(clamp(x, 0, 1))[1]));
}

TEST(Elementwise, ComparisonsLogicalBitwise) {
  Tensor a = it({1, 2, 3}), b = ft({1.5, 2, 2.5});
  EXPECT_EQ(lt(a, b).dtype(), DType::Bool);
  EXPECT_VALUES(lt(a, b), 1, 0, 0);
  EXPECT_VALUES(ge(a, 2), 0, 1, 1);
  EXPECT_VALUES(eq(a, b), 0, 1, 0);
  Tensor p = tensor<bool>({true, true, false}), q = tensor<bool>({true, false, false});
  EXPECT_VALUES(logical_and(p, q), 1, 0, 0);
  EXPECT_VALUES(logical_xor(p, q), 0, 1, 0);
  EXPECT_VALUES(logical_not(a), 0, 0, 0);
  EXPECT_VALUES(bitwise_and(it({12, 10}), it({10, 6})), 8, 2);
  EXPECT_VALUES(bitwise_xor(it({12}), 5), 9);
  EXPECT_VALUES(bitwise_not(it({0, 5})), -1, -6);
  expect_error<TypeError>([&] { bitwise_and(ft({1}), ft({1})); }, {"bitwise_and", "float32"});
  expect_error<TypeError>([&] { neg(p); }, {"neg", "bool"});
}

TEST(Elementwise, PowInPlaceIntegers) {
  EXPECT_VALUES(pow(it({2, 3, -2}), it({10, 3, 3})), 1024, 27, -8);
  EXPECT_VALUES(pow(ft({4, 9}), 0.5), 2, 3);
  EXPECT_VALUES(pow(it({2}), 2.0), 4);
  EXPECT_EQ(pow(it({2}), 2.0).dtype(), DType::Float32);
}

TEST(Elementwise, PowByTheNumbersPyTorchSpecialCasesMatchesStdPow) {
  // 1, 2 and -1 are PyTorch's exact forms (x, x * x, 1 / x: each rounded once); the others within 2 ulp.
  Tensor x = add(mul(rand({1000}), 10), 0.01);
  x.data<float>()[0] = 0.0f;
  for (double e : {1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 2.5}) {
    Tensor got = pow(x, e);
    Tensor wide = pow(x.to(DType::Float64), e);  // (no special case: std::pow in double)
    ASSERT_EQ(got.dtype(), DType::Float32);
    for (int64_t i = 0; i < 1000; ++i) {
      const float want = std::pow(x.data<float>()[i], static_cast<float>(e));
      const float g = got.data<float>()[i];
      const float xi = x.data<float>()[i];
      if (e == 1.0 || e == 2.0 || e == -1.0) {
        EXPECT_EQ(g, e == 1.0 ? xi : e == 2.0 ? xi * xi : 1.0f / xi) << e << " " << i;
      } else if (std::isinf(want)) {
        EXPECT_EQ(g, want) << e << " " << i;
      } else {
        EXPECT_NEAR(g, wide.data<double>()[i], 2.5e-7 * std::abs(want)) << e << " " << i;
      }
    }
  }
  EXPECT_VALUES(pow(ft({-8, 2}), 3.0), -512, 8);
  EXPECT_VALUES(pow(ft({3, -4}), it({2, 2})), 9, 16);  // a tensor of exponents: the general kernel
}

TEST(Elementwise, WhereLerpAddcmulAddcdiv) {
  Tensor c = tensor<bool>({true, false, true});
  EXPECT_VALUES(where(c, ft({1, 2, 3}), it({7, 8, 9})), 1, 8, 3);
  EXPECT_VALUES(where(c, it({1, 2, 3}), 0), 1, 0, 3);
  expect_error<TypeError>([&] { where(it({1, 0, 1}), ft({1, 2, 3}), ft({1, 2, 3})); }, {"where", "bool"});
  EXPECT_VALUES(lerp(ft({0, 10}), ft({10, 20}), 0.25), 2.5, 12.5);
  EXPECT_VALUES(lerp(ft({0, 10}), ft({10, 20}), ft({1, 0})), 10, 10);
  EXPECT_VALUES(addcmul(ft({1, 1}), ft({2, 3}), ft({4, 5}), 0.5), 5, 8.5);
  Tensor s = ft({1, 1});
  addcdiv_(s, ft({2, 3}), ft({4, 6}), 2);
  EXPECT_VALUES(s, 2, 2);
}

TEST(Elementwise, HalfAndBFloat16ComputeInFloat) {
  Tensor h = full({4}, 1000.0, DType::Float16);
  Tensor r = add(h, full({4}, 0.5, DType::Float16));
  EXPECT_EQ(r.dtype(), DType::Float16);
  EXPECT_VALUES(r, 1000.5, 1000.5, 1000.5, 1000.5);
  Tensor bf = full({2}, 256.0, DType::BFloat16);
  EXPECT_VALUES(add(bf, 1), 256, 256);  // 257 is not representable: rounds to even (256)
  EXPECT_VALUES(add(bf, 3), 260, 260);  // 259 ties between 258 and 260 -> 260 (even mantissa)
  expect_close(exp(ft({1, 2}).to(DType::BFloat16)), {2.71875, 7.375}, 1e-6);
}

TEST(Elementwise, EmptyAndScalarTensors) {
  Tensor e = zeros({0, 4});
  EXPECT_EQ(add(e, ft({1, 2, 3, 4})).sizes(), (IntList{0, 4}));
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(mul(s, s).dim(), 0);
  EXPECT_EQ(mul(s, s).item<double>(), 4.0);
}

TEST(Elementwise, IsCloseAndAllClose) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = ft({1.0f, 1.0f, inf, inf, nan, 100.0f}), b = ft({1.0f, 1.1f, inf, -inf, nan, 100.05f});
  EXPECT_VALUES(isclose(a, b), 1, 0, 1, 0, 0, 0);
  EXPECT_VALUES(isclose(a, b, 1e-3), 1, 0, 1, 0, 0, 1);  // rtol scales with |b|
  EXPECT_VALUES(isclose(a, b, 0, 0.2, true), 1, 1, 1, 0, 1, 1);
  EXPECT_TRUE(allclose(ft({1, 2}), tensor<int64_t>({1, 2})));  // mixed dtypes compare as float64
  EXPECT_FALSE(allclose(a, a));                                // NaN != NaN
  EXPECT_TRUE(allclose(a, a, 0, 0, true));
  expect_error<ValueError>([&] { isclose(a, b, -1); }, {"isclose", "rtol"});
}

}  // namespace trainrun
