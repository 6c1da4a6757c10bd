#include <cmath>

#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(NN, SoftmaxIsStableAndSumsToOne) {
  Tensor x = ft({1000, 1001, 1002, -5, 0, 5}, {2, 3});
  Tensor s = softmax(x, 1);
  double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
  expect_close(s.select(0, 0), {e2 / z, e1 / z, 1 / z});
  expect_close(sum(s, {1}), {1, 1});
  expect_close(log_softmax(x, 1).select(0, 0).select(0, 2), {-std::log(z)});
  // Along dim 0 (non-last) equals the transpose's along dim 1.
  expect_close(softmax(x, 0), values(softmax(x.t(), 1).t()));
  Tensor big = randn({3, 1000});
  expect_close(sum(softmax(big, -1), {1}), {1, 1, 1});
  expect_close(exp(log_softmax(big, 1)), values(softmax(big, 1)), 1e-5);
  Tensor h = x.to(DType::Float16);
  expect_close(softmax(h, 1).select(0, 0), {e2 / z, e1 / z, 1 / z}, 1e-3);
  // A NaN makes its row NaN, whether the row's max meets it in 8 lanes at a time or in the tail.
  Tensor with_nan = randn({3, 19});
  with_nan.data<float>()[3] = std::nanf("");            // row 0, in the vector part
  with_nan.data<float>()[19 + 18] = std::nanf("");      // row 1, in the tail
  Tensor s_nan = softmax(with_nan, 1);
  for (int64_t c = 0; c < 19; ++c) {
    EXPECT_TRUE(std::isnan(s_nan.data<float>()[c])) << c;
    EXPECT_TRUE(std::isnan(s_nan.data<float>()[19 + c])) << c;
    EXPECT_FALSE(std::isnan(s_nan.data<float>()[38 + c])) << c;
  }
}

TEST(NN, LayerNormAndRmsNormWithSavedStats) {
  Tensor x = ft({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  auto [y, mean, rstd] = layer_norm(x, {4}, ft({1, 1, 2, 2}), ft({0, 0, 0, 1}), 0);
  EXPECT_EQ(mean.sizes(), (IntList{2, 1}));
  expect_close(mean, {2.5, 2});
  double r = 1 / std::sqrt(1.25);
  expect_close(rstd.select(0, 0), {r});
  expect_close(y.select(0, 0), {-1.5 * r, -0.5 * r, 1.0 * r, 3.0 * r + 1});
  auto [z, rs] = rms_norm(x, {4}, ft({1, 1, 1, 1}), 0);
  double rr = 1 / std::sqrt(7.5);
  expect_close(z.select(0, 0), {rr, 2 * rr, 3 * rr, 4 * rr});
  expect_close(rs.select(0, 1), {0.5});
  expect_error<ValueError>([&] { layer_norm(x, {3}, Tensor(), Tensor()); }, {"layer_norm", "[3]", "[2, 4]"});
}

TEST(NN, EmbeddingOneHot) {
  Tensor w = arange(12, DType::Float32).view({4, 3});
  Tensor e = embedding(w, it({3, 0, 3, 1}, {2, 2}));
  EXPECT_EQ(e.sizes(), (IntList{2, 2, 3}));
  EXPECT_VALUES(e.select(0, 0).select(0, 0), 9, 10, 11);
  expect_error<IndexError>([&] { embedding(w, it({4})); }, {"index_select", "index 4", "size 4"});
  EXPECT_VALUES(one_hot(it({0, 2}), 3), 1, 0, 0, 0, 0, 1);
  EXPECT_EQ(one_hot(it({1, 3})).size(1), 4);
  expect_error<IndexError>([&] { one_hot(it({3}), 3); }, {"one_hot", "[0, 3)"});
}

// Direct convolution, straight from the definition.
std::vector<double> ref_conv(const Tensor& x, const Tensor& w, int64_t s, int64_t p, int64_t d, int64_t groups) {
  auto vx = values(x), vw = values(w);
  int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), Cg = w.size(1), kH = w.size(2), kW = w.size(3);
  int64_t Ho = (H + 2 * p - d * (kH - 1) - 1) / s + 1, Wo = (W + 2 * p - d * (kW - 1) - 1) / s + 1;
  std::vector<double> out(N * O * Ho * Wo, 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t g = o / (O / groups);
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kH; ++i)
              for (int64_t j = 0; j < kW; ++j) {
                int64_t ih = oh * s - p + i * d, iw = ow * s - p + j * d;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += vx[((n * C + g * Cg + c) * H + ih) * W + iw] * vw[((o * Cg + c) * kH + i) * kW + j];
              }
          out[((n * O + o) * Ho + oh) * Wo + ow] = acc;
        }
    }
  return out;
}

TEST(NN, Conv2dMatchesDirectConvolution) {
  manual_seed(5);
  struct Case { int64_t s, p, d, g; };
  for (Case c : {Case{1, 0, 1, 1}, Case{2, 1, 1, 1}, Case{1, 2, 2, 1}, Case{1, 1, 1, 2}, Case{3, 0, 1, 4}}) {
    Tensor x = randn({2, 4, 9, 8}), w = randn({4, 4 / c.g, 3, 3});
    Tensor y = conv2d(x, w, Tensor(), {c.s, c.s}, {c.p, c.p}, {c.d, c.d}, c.g);
    expect_close(y, ref_conv(x, w, c.s, c.p, c.d, c.g), 1e-4);
  }
  Tensor x = randn({1, 3, 5, 5}), w = randn({2, 3, 1, 1}), b = ft({1, -1});
  Tensor y = conv2d(x, w, b);
  auto ref = ref_conv(x, w, 1, 0, 1, 1);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += i < 25 ? 1 : -1;
  expect_close(y, ref, 1e-4);
  EXPECT_EQ(conv2d(randn({3, 5, 5}), w).sizes(), (IntList{2, 5, 5}));  // unbatched
  expect_error<ValueError>([&] { conv2d(randn({1, 2, 5, 5}), w); }, {"conv2d", "2 channels"});
  expect_error<ValueError>([&] { conv2d(randn({1, 3, 2, 2}), randn({1, 3, 3, 3})); }, {"conv2d", "larger"});
}

// float32 runs on oneDNN, float64 on im2col + GEMM: the two paths must agree
// on rectangular kernels, unequal strides/padding, a right padding that
// floor division leaves negative, groups with bias, and strided inputs.
TEST(NN, Conv2dOneDnnAgreesWithIm2col) {
  manual_seed(6);
  struct Case { IntList in, w, s, p, d; int64_t g; bool bias; };
  for (const Case& c : {Case{{2, 4, 9, 8}, {6, 2, 2, 3}, {2, 1}, {0, 1}, {1, 1}, 2, true},
                        Case{{1, 3, 9, 9}, {5, 3, 2, 2}, {2, 2}, {0, 0}, {1, 1}, 1, false},   // pad_r = -1
                        Case{{3, 8, 7, 11}, {8, 1, 3, 3}, {1, 2}, {1, 2}, {2, 1}, 8, true},   // depthwise
                        Case{{2, 16, 6, 6}, {32, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true}}) {
    Tensor x = randn(c.in), w = randn(c.w), b = c.bias ? randn({c.w[0]}) : Tensor();
    Tensor y32 = conv2d(x, w, b, c.s, c.p, c.d, c.g);
    Tensor y64 = conv2d(x.to(DType::Float64), w.to(DType::Float64), b.defined() ? b.to(DType::Float64) : b, c.s, c.p,
                        c.d, c.g);
    ASSERT_EQ(y32.sizes(), y64.sizes());
    EXPECT_TRUE(allclose(y32.to(DType::Float64), y64, 1e-4, 1e-4)) << "input " << x.shape_str() << " weight "
                                                                   << w.shape_str();
  }
  // A transposed (non-contiguous) input and f16 go through the same paths.
  Tensor x = randn({2, 4, 7, 7}), w = randn({3, 4, 3, 3});
  Tensor xt = x.transpose(2, 3);
  Tensor ref = conv2d(contiguous(xt).to(DType::Float64), w.to(DType::Float64), Tensor(), {1, 1}, {1, 1});
  EXPECT_TRUE(allclose(conv2d(xt, w, Tensor(), {1, 1}, {1, 1}).to(DType::Float64), ref, 1e-4, 1e-4));
  Tensor y16 = conv2d(xt.to(DType::Float16), w.to(DType::Float16), Tensor(), {1, 1}, {1, 1});
  EXPECT_EQ(y16.dtype(), DType::Float16);
  EXPECT_TRUE(allclose(y16.to(DType::Float64), ref, 5e-2, 5e-2));
}

TEST(NN, Pooling) {
  Tensor x = arange(16, DType::Float32).view({1, 1, 4, 4});
  auto [m, idx] = max_pool2d(x, {2, 2});
  EXPECT_VALUES(m, 5, 7, 13, 15);
  EXPECT_VALUES(idx, 5, 7, 13, 15);
  auto [mp, ip] = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  EXPECT_VALUES(mp, 5, 7, 13, 15);
  EXPECT_EQ(std::get<0>(max_pool2d(x, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true)).sizes(), (IntList{1, 1, 2, 2}));
  EXPECT_VALUES(avg_pool2d(x, {2, 2}), 2.5, 4.5, 10.5, 12.5);
  // Padding counted in the divisor or not.
  EXPECT_VALUES(avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}).select(3, 0).select(2, 0), 0.0 / 4);
  EXPECT_VALUES(avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, false, false).select(3, 1).select(2, 0), 1.5);
}

TEST(NN, DropoutAndLosses) {
  manual_seed(9);
  Tensor x = ones({100000});
  auto [y, mask] = dropout(x, 0.25);
  EXPECT_NEAR(mean(y).item<double>(), 1.0, 0.02);
  EXPECT_NEAR(mean(mask.to(DType::Float32)).item<double>(), 0.75, 0.01);
  EXPECT_EQ(values(std::get<0>(dropout(x, 0.5, false))), values(x));
  Tensor logits = ft({2, 1, 0.1, 0.5, 2.5, 0.3}, {2, 3});
  Tensor target = it({0, 1});
  Tensor lp = log_softmax(logits, 1);
  auto lpv = values(lp);
  expect_close(cross_entropy(logits, target), {-(lpv[0] + lpv[4]) / 2});
  expect_close(cross_entropy(logits, target, Tensor(), "sum"), {-(lpv[0] + lpv[4])});
  expect_close(cross_entropy(logits, target, ft({1, 3, 1})), {-(lpv[0] + 3 * lpv[4]) / 4});
  expect_close(cross_entropy(logits, it({0, -100})), {-lpv[0]});
  expect_close(nll_loss(lp, target, Tensor(), "none"), {-lpv[0], -lpv[4]});
  expect_error<IndexError>([&] { cross_entropy(logits, it({0, 3})); }, {"nll_loss", "[0, 3)"});
  expect_error<ValueError>([&] { cross_entropy(logits, target, Tensor(), "avg"); }, {"reduction", "avg"});
}

}  // namespace trainrun
