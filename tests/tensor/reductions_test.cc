#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(Reductions, SumOverAnyDims) {
  Tensor x = arange(24, DType::Float32).view({2, 3, 4});
  EXPECT_VALUES(sum(x), 276);
  EXPECT_VALUES(sum(x, {1}), 12, 15, 18, 21, 48, 51, 54, 57);
  EXPECT_VALUES(sum(x, {0, 2}), 60, 92, 124);
  EXPECT_EQ(sum(x, {0, 2}, true).sizes(), (IntList{1, 3, 1}));
  EXPECT_VALUES(sum(x.permute({2, 0, 1}), {-1}), 12, 48, 15, 51, 18, 54, 21, 57);
  expect_error<IndexError>([&] { sum(x, {3}); }, {"sum", "dim 3"});
  expect_error<IndexError>([&] { sum(x, {1, -2}); }, {"more than once"});
}

TEST(Reductions, SumsOverLeadingDimsAddRowsInPlaceOfTransposing) {
  // The fast path (a contiguous tensor, dims 0..k-1) against the general one (the same values, non-contiguous).
  Tensor x = arange(5 * 7 * 9, DType::Float32).view({5, 7, 9});
  Tensor strided = x.permute({2, 0, 1}).contiguous().permute({1, 2, 0});  // equal to x, other strides
  EXPECT_TRUE(allclose(sum(x, {0}), sum(strided, {0}), 0.0, 0.0));
  EXPECT_TRUE(allclose(sum(x, {0, 1}), sum(strided, {0, 1}), 0.0, 0.0));
  EXPECT_TRUE(allclose(sum(x, {1, 0}, true), sum(strided, {0, 1}, true), 0.0, 0.0));
  EXPECT_EQ(sum(x, {0, 1}, true).sizes(), (IntList{1, 1, 9}));
  EXPECT_TRUE(allclose(mean(x, {-3}), mean(strided, {0}), 1e-6, 0.0));
  EXPECT_VALUES(sum(arange(6, DType::Float64).view({3, 2}), {0}), 6, 9);
  // Leading dims swapped in memory (a [B, T, C] gradient laid out [T, B, C]) are rows too, in another order.
  Tensor swapped = arange(7 * 5 * 9, DType::Float32).view({7, 5, 9}).permute({1, 0, 2});
  EXPECT_TRUE(allclose(sum(swapped, {0, 1}, true), sum(swapped.contiguous(), {0, 1}, true), 1e-6, 0.0));
  EXPECT_TRUE(allclose(mean(swapped, {1, 0}), mean(swapped.contiguous(), {0, 1}), 1e-6, 0.0));
  EXPECT_TRUE(allclose(sum(swapped, {0}), sum(swapped.contiguous(), {0}), 0.0, 0.0));  // not rows: dim 1 is outer
  // Many rows: blocks of 128 combined pairwise stay as accurate as the rows plan.
  Tensor tall = full({300000, 3}, 0.1, DType::Float32);
  const double expected = static_cast<double>(0.1f) * 300000;
  EXPECT_NEAR(sum(tall, {0}).select(0, 1).item<double>(), expected, expected * 2e-6);
  // No rows: sums are zero, means NaN (as the rows plan gives).
  Tensor none = empty({0, 4}, DType::Float32);
  EXPECT_VALUES(sum(none, {0}), 0, 0, 0, 0);
  EXPECT_TRUE(std::isnan(mean(none, {0}).select(0, 2).item<double>()));
}

// Reduced dims with kept dims on both sides ([B, T, C].sum(1)) read [outer, mid, inner] blocks in place
// (reduce_columns.h): against the rows plan (the same values, non-contiguous), for sum, mean, amax and amin,
// keepdim, float64, blocks of more than 128 rows, a NaN, and thread counts.
TEST(Reductions, ReductionsOverMiddleDimsReadBlocksInPlace) {
  Tensor x = arange(4 * 6 * 5 * 3, DType::Float32).view({4, 6, 5, 3});
  Tensor strided = x.permute({3, 0, 1, 2}).contiguous().permute({1, 2, 3, 0});  // equal to x, other strides
  for (IntList dims : {IntList{1}, IntList{1, 2}, IntList{2}, IntList{-3, -2}}) {
    EXPECT_TRUE(allclose(sum(x, dims), sum(strided, dims), 0.0, 0.0));
    EXPECT_TRUE(allclose(mean(x, dims, true), mean(strided, dims, true), 1e-6, 0.0));
    EXPECT_TRUE(allclose(amax(x, dims), amax(strided, dims), 0.0, 0.0));
    EXPECT_TRUE(allclose(amin(x, dims, true), amin(strided, dims, true), 0.0, 0.0));
  }
  EXPECT_EQ(sum(x, {1, 2}, true).sizes(), (IntList{4, 1, 1, 3}));
  EXPECT_EQ(amax(x, {2}).sizes(), (IntList{4, 6, 3}));
  EXPECT_VALUES(sum(arange(12, DType::Float64).view({2, 3, 2}), {1}), 6, 9, 24, 27);
  Tensor tall = full({3, 300000, 2}, 0.1, DType::Float32);  // many blocks of 128 rows, combined pairwise
  const double expected = static_cast<double>(0.1f) * 300000;
  EXPECT_NEAR(sum(tall, {1}).select(0, 2).select(0, 1).item<double>(), expected, expected * 2e-6);
  Tensor y = arange(2 * 7 * 3, DType::Float32).view({2, 7, 3});
  y.select(0, 1).select(0, 4).select(0, 2).fill_(std::numeric_limits<double>::quiet_NaN());
  for (Tensor e : {amax(y, {1}), amin(y, {1})}) {
    EXPECT_TRUE(std::isnan(e.select(0, 1).select(0, 2).item<double>()));
    EXPECT_FALSE(std::isnan(e.select(0, 1).select(0, 1).item<double>()));
  }
  manual_seed(3);
  Tensor r = randn({5, 1000, 40});
  const int before = get_num_threads();
  set_num_threads(1);
  Tensor one = sum(r, {1});
  set_num_threads(3);
  Tensor three = sum(r, {1});
  set_num_threads(before);
  EXPECT_TRUE(allclose(one, three, 0.0, 0.0));
}

TEST(Reductions, IntegerSumsPromoteToInt64) {
  Tensor b = tensor<bool>({true, true, false});
  EXPECT_EQ(sum(b).dtype(), DType::Int64);
  EXPECT_VALUES(sum(b), 2);
  EXPECT_EQ(sum(arange(5, DType::Int32)).dtype(), DType::Int64);
  EXPECT_EQ(sum(ft({1, 2}), {}, false, DType::Float64).dtype(), DType::Float64);
  expect_error<Error>([&] { mean(arange(5)); }, {"mean(): could not infer output dtype", "int64"});  // RuntimeError in Python
}

TEST(Reductions, LargeFloatSumIsAccurate) {
  // 16M values of 0.1f: a naive float loop drifts by percent, pairwise stays exact-ish.
  const int64_t n = 1 << 24;
  Tensor x = full({n}, 0.1, DType::Float32);
  double expected = static_cast<double>(0.1f) * n;
  double got = sum(x).item<double>();
  EXPECT_NEAR(got, expected, expected * 1e-6);
  EXPECT_NEAR(mean(x).item<double>(), 0.1f, 1e-7);
}

TEST(Reductions, EveryReductionWithoutADimKeepsEveryDimAsOne) {
  // keepdim=true with no dim reduces over all dims and keeps each as size 1
  // (PyTorch gives [1, 1, 1] for all of these, argmax/argmin included); the
  // values are those of the plain full reduction.
  const Tensor x = sub(arange(24, DType::Float32).view({2, 3, 4}), scalar_tensor(10.5));
  const Tensor b = gt(x, scalar_tensor(-20.0));
  const IntList ones{1, 1, 1};
  struct Case {
    std::string name;
    Tensor kept, plain;
  };
  const std::vector<Case> cases = {
      {"sum", sum(x, {}, true), sum(x)},
      {"mean", mean(x, {}, true), mean(x)},
      {"prod", prod(x, {}, true), prod(x)},
      {"amax", amax(x, {}, true), amax(x)},
      {"amin", amin(x, {}, true), amin(x)},
      {"argmax", argmax(x, std::nullopt, true), argmax(x)},
      {"argmin", argmin(x, std::nullopt, true), argmin(x)},
      {"var", var(x, {}, 1, true), var(x)},
      {"std", trainrun::std(x, {}, 1, true), trainrun::std(x)},
      {"norm", norm(x, 2, {}, true), norm(x)},
      {"all", all(b, {}, true), all(b)},
      {"any", any(b, {}, true), any(b)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.kept.sizes(), ones);
    EXPECT_EQ(c.plain.dim(), 0);
    EXPECT_EQ(c.kept.dtype(), c.plain.dtype());
    EXPECT_EQ(c.kept.reshape({}).to(DType::Float64).item<double>(), c.plain.to(DType::Float64).item<double>());
  }
  EXPECT_EQ(argmax(x, std::nullopt, true).item<int64_t>(), 23);
  EXPECT_EQ(argmin(x, std::nullopt, true).item<int64_t>(), 0);
}

TEST(Reductions, MaxMinArgmaxWithIndices) {
  Tensor x = ft({3, 7, 7, 1, 9, 2}, {2, 3});
  auto [v, i] = max(x, 1);
  EXPECT_VALUES(v, 7, 9);
  EXPECT_VALUES(i, 1, 1);  // first occurrence
  auto [mv, mi] = min(x, 0, true);
  EXPECT_EQ(mv.sizes(), (IntList{1, 3}));
  EXPECT_VALUES(mi, 1, 0, 1);
  EXPECT_VALUES(argmax(x), 4);
  EXPECT_VALUES(argmin(x, 1), 0, 0);
  EXPECT_VALUES(argmin(ft({5, 1, 1})), 1);  // first occurrence
  EXPECT_VALUES(max(x), 9);
  EXPECT_VALUES(amin(x, {0}), 1, 7, 2);
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(max(tensor<double>({1, nan, 3})).item<double>()));
  expect_error<IndexError>([&] { max(zeros({0})); }, {"zero-size"});
}

TEST(Reductions, VarStdNorm) {
  Tensor x = ft({1, 2, 3, 4});
  expect_close(var(x), {1.6666667});
  expect_close(var(x, {}, 0), {1.25});
  expect_close(std(x), {std::sqrt(5.0 / 3.0)});
  expect_close(norm(x), {std::sqrt(30.0)});
  expect_close(norm(x, 1), {10});
  expect_close(norm(ft({-5, 3}), INFINITY), {5});
  expect_close(norm(ft({0, 3, 0}), 0), {1});
  expect_close(norm(x, 3), {std::cbrt(100.0)});
  EXPECT_TRUE(std::isnan(var(ft({1})).item<double>()));
}

TEST(Reductions, LogsumexpIsStable) {
  Tensor x = ft({1000, 1000});
  expect_close(logsumexp(x, {0}), {1000 + std::log(2.0)});
  Tensor m = tensor<double>({-INFINITY, -INFINITY});
  EXPECT_EQ(logsumexp(m, {0}).item<double>(), -INFINITY);
}

TEST(Reductions, AllAnyProdCumsum) {
  Tensor x = it({1, 0, 3, 4}, {2, 2});
  EXPECT_VALUES(all(x, {1}), 0, 1);
  EXPECT_VALUES(any(x), 1);
  EXPECT_VALUES(all(zeros({0})), 1);
  EXPECT_VALUES(prod(x, {0}), 3, 0);
  EXPECT_VALUES(cumsum(x, 0), 1, 0, 4, 4);
  EXPECT_VALUES(cumsum(x, 1), 1, 1, 3, 7);
  EXPECT_EQ(cumsum(tensor<int32_t>({1, 2}), 0).dtype(), DType::Int64);
}

TEST(Reductions, HalfSumAccumulatesInFloat) {
  Tensor h = full({4096}, 1.0, DType::Float16);
  EXPECT_EQ(sum(h).dtype(), DType::Float16);
  EXPECT_VALUES(sum(h), 4096);  // a float16 accumulator would stall at 2048
}

// A long sum is cut into fixed pieces, so its rounding does not depend on
// how many threads ran it.
TEST(Reductions, LongSumIsIndependentOfThreadCount) {
  manual_seed(11);
  Tensor x = randn({(int64_t(1) << 20) + 12345});
  const int before = get_num_threads();
  set_num_threads(1);
  float one = sum(x).item<float>();
  set_num_threads(3);
  float three = sum(x).item<float>();
  set_num_threads(before);
  EXPECT_EQ(one, three);
  EXPECT_NEAR(one, sum(x.to(DType::Float64)).item<double>(), 1e-3);
}

}  // namespace trainrun
