#include <array>
#include <vector>

#include "tensor/cpu/matmul_onednn.h"
#include "tensor/dispatcher.h"
#include "tensor/op_schemas.h"
#include "tests/tensor/test_util.h"

namespace trainrun {

// Reference product in double, straight from the definition.
std::vector<double> ref_mm(const Tensor& a, const Tensor& b) {
  auto va = values(a), vb = values(b);
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<double> out(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) out[i * N + j] += va[i * K + k] * vb[k * N + j];
  return out;
}

TEST(Linalg, MmWithTransposedViewsNeedsNoCopy) {
  manual_seed(1);
  Tensor a = randn({7, 5}), b = randn({5, 3});
  expect_close(mm(a, b), ref_mm(a, b), 1e-5);
  Tensor at = randn({5, 7}).t(), bt = randn({3, 5}).t();
  expect_close(mm(at, bt), ref_mm(at, bt), 1e-5);
  Tensor sliced = randn({10, 10}).slice(0, 0, 10, 2).slice(1, 0, 5);  // row stride 20, non-unit
  expect_close(mm(sliced, b), ref_mm(sliced, b), 1e-5);
  Tensor strided = randn({5, 6}).slice(1, 0, 6, 2);  // column stride 2: must copy
  expect_close(mm(a, strided), ref_mm(a, strided), 1e-5);
}

TEST(Linalg, ShapeErrorsNameBothShapes) {
  expect_error<ValueError>([] { mm(zeros({2, 3}), zeros({4, 5})); }, {"mm", "[2, 3]", "[4, 5]"});
  expect_error<ValueError>([] { matmul(zeros({2, 3, 4}), zeros({5, 6})); }, {"matmul", "[2, 3, 4]"});
  // Batched on both sides: the contracted dims must agree either way round.
  expect_error<ValueError>([] { matmul(zeros({2, 3, 4}), zeros({2, 3, 5})); },
                           {"matmul", "cannot be multiplied", "4 vs 3"});
  expect_error<ValueError>([] { matmul(zeros({2, 3, 2}), zeros({2, 3, 5})); },
                           {"matmul", "cannot be multiplied", "2 vs 3"});
  expect_error<TypeError>([] { mm(zeros({2, 2}), zeros({2, 2}, DType::Float64)); }, {"mm", "float64"});
  expect_error<ValueError>([] { bmm(zeros({2, 3, 4}), zeros({3, 4, 5})); }, {"bmm", "batch"});
  // Through the dispatcher, as the generated Python bindings and compiled graphs call: the kernels check too.
  expect_error<ValueError>([] { ops::mm::call(keys_of(zeros({3, 4}), zeros({3, 4})), zeros({3, 4}), zeros({3, 4}),
                                              Tensor()); }, {"mm", "[3, 4]", "cannot be multiplied"});
  expect_error<ValueError>([] { ops::addmm::call(keys_of(zeros({4})), zeros({4}), zeros({3, 4}), zeros({3, 4}), 1,
                                                 1); }, {"addmm", "cannot be multiplied"});
  expect_error<ValueError>([] { ops::baddbmm::call(keys_of(zeros({2, 3, 3})), zeros({2, 3, 3}), zeros({2, 3, 4}),
                                                   zeros({3, 4, 3}), 1, 1); }, {"bmm", "batch"});
  expect_error<ValueError>([] {
    const Tensor meta = to(zeros({3, 4}), Device(DeviceType::Meta));
    ops::mm::call(keys_of(meta, meta), meta, meta, Tensor());
  }, {"mm", "cannot be multiplied"});
  Tensor wrong_out = zeros({3, 3});
  expect_error<ValueError>([&] { mm_out(wrong_out, zeros({2, 3}), zeros({3, 4})); }, {"mm", "out=", "[3, 3]", "[2, 4]"});
}

TEST(Linalg, MatmulBroadcastsBatches) {
  manual_seed(2);
  Tensor a = randn({2, 1, 3, 4}), b = randn({5, 4, 2});
  Tensor r = matmul(a, b);
  EXPECT_EQ(r.sizes(), (IntList{2, 5, 3, 2}));
  Tensor a10 = a.select(0, 1).select(0, 0), b3 = b.select(0, 3);
  expect_close(r.select(0, 1).select(0, 3), ref_mm(a10, b3), 1e-5);
  EXPECT_EQ(matmul(randn({4}), randn({4, 3})).sizes(), (IntList{3}));
  EXPECT_EQ(matmul(randn({2, 3, 4}), randn({4})).sizes(), (IntList{2, 3}));
  EXPECT_EQ(matmul(randn({4}), randn({4})).dim(), 0);
}

TEST(Linalg, AddmmBaddbmmDotMvOuter) {
  Tensor a = ft({1, 2, 3, 4}, {2, 2}), b = ft({1, 0, 0, 1}, {2, 2});
  EXPECT_VALUES(addmm(ft({10, 20}), a, b, 1, 2), 12, 24, 16, 28);
  EXPECT_VALUES(baddbmm(ones({1, 2, 2}), a.unsqueeze(0), b.unsqueeze(0), 0.5, 1), 1.5, 2.5, 3.5, 4.5);
  EXPECT_VALUES(dot(ft({1, 2, 3}), ft({4, 5, 6})), 32);
  EXPECT_VALUES(mv(a, ft({1, 1})), 3, 7);
  EXPECT_VALUES(outer(ft({1, 2}), ft({3, 4})), 3, 4, 6, 8);
}

// Batches BLAS reads in place (contiguous, each matrix transposed, a permuted [T, B, C] layout as attention's
// heads, a batch expanded from one matrix) against one mm per matrix; a layout BLAS cannot read is copied.
TEST(Linalg, BatchedProductsInEveryLayoutEqualOneProductPerMatrix) {
  Tensor base = randn({6, 5, 7});
  Tensor other = randn({6, 7, 3});
  std::vector<std::pair<const char*, Tensor>> lefts = {
      {"contiguous", base},
      {"transposed", base.transpose(1, 2).contiguous().transpose(1, 2)},
      {"permuted", base.permute({1, 0, 2}).contiguous().permute({1, 0, 2})},
      {"expanded", base.narrow(0, 0, 1).expand({6, 5, 7})},
      {"strided", base.transpose(0, 2).contiguous().transpose(0, 2)},  // (copied: neither dim 1 nor 2 has stride 1)
  };
  for (auto& [what, a] : lefts) {
    for (bool b_transposed : {false, true}) {
      Tensor b = b_transposed ? other.transpose(1, 2).contiguous().transpose(1, 2) : other;
      Tensor acc = randn({6, 5, 3});
      Tensor got = baddbmm(acc, a, b, 0.5, 2.0);
      Tensor plain = bmm(a, b);
      for (int64_t i = 0; i < 6; ++i) {
        Tensor want = mm(a.select(0, i).contiguous(), b.select(0, i).contiguous());
        EXPECT_TRUE(allclose(plain.select(0, i), want, 1e-5, 1e-5)) << what << " " << b_transposed << " " << i;
        EXPECT_TRUE(allclose(got.select(0, i), add(mul(acc.select(0, i), 0.5), mul(want, 2.0)), 1e-5, 1e-5))
            << what << " " << b_transposed << " " << i;
      }
    }
  }
  EXPECT_TRUE(allclose(bmm(base.to(DType::Float64), other.to(DType::Float64)), bmm(base, other).to(DType::Float64),
                       1e-5, 1e-5));
}

// A linear layer's addmm (a bias row, beta = alpha = 1: oneDNN with the bias in its epilogue) equals
// mm then the bias, for the layouts Linear passes (the weight transposed) and others; other betas, alphas
// and biases take BLAS.
TEST(Linalg, AddmmWithABiasRowEqualsTheProductPlusTheBias) {
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{7, 13, 5}, {512, 128, 384}, {1, 64, 3}, {33, 1, 17}}) {
    Tensor x = randn({M, K}), w = randn({N, K}), bias = randn({N});
    const Tensor w_t = w.transpose(0, 1);  // [K, N], as Linear passes it
    Tensor want = add(mm(x, w_t), bias);
    EXPECT_TRUE(allclose(addmm(bias, x, w_t), want, 1e-5, 1e-4)) << M << "x" << K << "x" << N;
    EXPECT_TRUE(allclose(addmm(bias.unsqueeze(0), x, w_t.contiguous()), want, 1e-5, 1e-4)) << M << " [1, N]";
    const Tensor x_t = x.transpose(0, 1).contiguous().transpose(0, 1);  // x read transposed
    EXPECT_TRUE(allclose(addmm(bias, x_t, w_t), want, 1e-5, 1e-4)) << M << " x transposed";
    EXPECT_TRUE(allclose(addmm(bias, x, w_t, 0.5, 2.0), add(mul(mm(x, w_t), 2.0), mul(bias, 0.5)), 1e-5, 1e-4));
    Tensor full_bias = randn({M, N});
    EXPECT_TRUE(allclose(addmm(full_bias, x, w_t), add(mm(x, w_t), full_bias), 1e-5, 1e-4));
  }
}

// onednn_linear's epilogues (what a compiled linear + activation will use) equal the eager ops after it.
TEST(Linalg, OnednnLinearEpiloguesEqualTheActivationAfterTheProduct) {
  const int64_t M = 9, K = 20, N = 11;
  Tensor x = randn({M, K}), w = randn({N, K}), bias = randn({N});
  Tensor pre = add(mm(x, w.transpose(0, 1)), bias);
  const std::vector<std::pair<Epilogue, Tensor>> cases = {
      {Epilogue::None, pre}, {Epilogue::Relu, relu(pre)}, {Epilogue::Gelu, gelu(pre, "none")},
      {Epilogue::GeluTanh, gelu(pre, "tanh")}};
  for (const auto& [epilogue, want] : cases) {
    Tensor out = empty({M, N});
    ASSERT_TRUE(onednn_linear(M, K, N, {x.data<float>(), false, K}, {w.data<float>(), true, K}, bias.data<float>(),
                              epilogue, out.data<float>()));
    EXPECT_TRUE(allclose(out, want, 1e-5, 1e-4)) << static_cast<int>(epilogue);
  }
  Tensor no_bias = empty({M, N});
  ASSERT_TRUE(onednn_linear(M, K, N, {x.data<float>(), false, K}, {w.data<float>(), true, K}, nullptr, Epilogue::None,
                            no_bias.data<float>()));
  EXPECT_TRUE(allclose(no_bias, mm(x, w.transpose(0, 1)), 1e-5, 1e-4));
}

// onednn_gemm (alpha, beta, batches, operands read transposed or with rows further apart than their length)
// equals the product in float64.
TEST(Linalg, OnednnGemmScalesAccumulatesAndBatches) {
  manual_seed(3);
  const int64_t B = 3, M = 33, K = 70, N = 45;
  Tensor a = randn({B, K, M + 5}).slice(2, 0, M).transpose(1, 2);  // each [M, K] read transposed, ld M + 5
  Tensor b = randn({B, K, N});
  Tensor out = randn({B, M, N});
  const Tensor before = out.clone();
  ASSERT_TRUE(onednn_gemm({B, M, K, N}, {a.data<float>(), true, M + 5, a.stride(0)},
                          {b.data<float>(), false, N, b.stride(0)}, 0.5f, 2.0f, out.data<float>()));
  Tensor want = add(mul(bmm(a.to(DType::Float64), b.to(DType::Float64)), 0.5), mul(before.to(DType::Float64), 2.0));
  EXPECT_TRUE(allclose(out.to(DType::Float64), want, 1e-5, 1e-4));
  Tensor one = empty({M, N});
  ASSERT_TRUE(onednn_gemm({1, M, K, N}, {a.data<float>(), true, M + 5}, {b.data<float>(), false, N}, 1.f, 0.f,
                          one.data<float>()));
  EXPECT_TRUE(allclose(one.to(DType::Float64), mm(select(a, 0, 0).to(DType::Float64), select(b, 0, 0).to(DType::Float64)),
                       1e-5, 1e-4));
  EXPECT_FALSE(onednn_gemm({B, M, K, N}, {a.data<float>(), true, M + 5, 0}, {b.data<float>(), false, N, b.stride(0)},
                           1.f, 0.f, out.data<float>()))
      << "a broadcast operand (batch stride 0) is left to BLAS";
}

// Products big enough for oneDNN (kOnednnMinMacs) in the layouts mm, addmm, bmm and baddbmm meet: each equals
// the product in float64.
TEST(Linalg, LargeFloatProductsInEveryLayoutEqualTheFloat64Product) {
  manual_seed(4);
  const int64_t M = 96, K = 80, N = 72;
  ASSERT_GE(M * K * N, kOnednnMinMacs);
  auto check = [](const Tensor& got, const Tensor& want, const char* what) {
    EXPECT_TRUE(allclose(got.to(DType::Float64), want, 1e-5, 1e-4)) << what;
  };
  auto f64 = [](const Tensor& t) { return t.to(DType::Float64); };
  Tensor a = randn({M, K}), b = randn({K, N});
  check(mm(a, b), mm(f64(a), f64(b)), "mm");
  Tensor at = randn({K, M}).t(), bt = randn({N, K}).t();
  check(mm(at, bt), mm(f64(at), f64(bt)), "mm of transposed views");
  Tensor rows = randn({M, K + 7}).slice(1, 0, K);  // rows K + 7 apart
  check(mm(rows, b), mm(f64(rows), f64(b)), "mm of a column slice");
  Tensor acc = randn({M, N});
  check(addmm(acc, a, b, 0.25, 3.0), add(mul(f64(acc), 0.25), mul(mm(f64(a), f64(b)), 3.0)), "addmm, full self");
  const int64_t B = 4;
  Tensor ba = randn({B, M, K}), bb = randn({B, N, K}).transpose(1, 2);
  check(bmm(ba, bb), bmm(f64(ba), f64(bb)), "bmm, second operand transposed");
  Tensor strided = randn({B * 2, M, K}).slice(0, 0, B * 2, 2);  // every other matrix
  check(bmm(strided, bb), bmm(f64(strided), f64(bb)), "bmm over every other matrix");
  Tensor bacc = randn({B, M, N});
  check(baddbmm(bacc, ba, bb, 0.5, 2.0), add(mul(f64(bacc), 0.5), mul(bmm(f64(ba), f64(bb)), 2.0)), "baddbmm");
  Tensor shared = randn({K, N}).unsqueeze(0).expand({B, K, N});  // batch stride 0
  check(bmm(ba, shared), bmm(f64(ba), f64(shared)), "bmm with a broadcast operand");
  Tensor x4 = randn({2, 3, M, K});
  check(matmul(x4, b), matmul(f64(x4), f64(b)), "matmul of a 4-d batch by a matrix");
}

// _addmm_activation equals the activation after addmm: through oneDNN's epilogue (a float32 bias row) and
// through addmm then the activation (other betas, float64, a full self).
TEST(Linalg, AddmmActivationEqualsTheActivationAfterAddmm) {
  Tensor x = randn({12, 20}), w = randn({9, 20}), bias = randn({9}), full = randn({12, 9});
  const Tensor w_t = w.transpose(0, 1);
  for (bool use_gelu : {false, true}) {
    auto act = [&](const Tensor& pre) { return use_gelu ? gelu(pre, "none") : relu(pre); };
    EXPECT_TRUE(allclose(addmm_activation(bias, x, w_t, 1, 1, use_gelu), act(addmm(bias, x, w_t)), 1e-5, 1e-4));
    EXPECT_TRUE(allclose(addmm_activation(bias, x, w_t, 0.5, 2, use_gelu), act(addmm(bias, x, w_t, 0.5, 2)), 1e-5,
                         1e-4));
    EXPECT_TRUE(allclose(addmm_activation(full, x, w_t, 1, 1, use_gelu), act(addmm(full, x, w_t)), 1e-5, 1e-4));
    Tensor x64 = x.to(DType::Float64), w64 = w_t.to(DType::Float64), b64 = bias.to(DType::Float64);
    Tensor got64 = addmm_activation(b64, x64, w64, 1, 1, use_gelu);
    EXPECT_EQ(got64.dtype(), DType::Float64);
    EXPECT_TRUE(allclose(got64, act(addmm(b64, x64, w64)), 1e-12, 1e-12));
  }
  expect_error<ValueError>([&] { addmm_activation(bias, x, w); }, {"_addmm_activation", "[12, 20]", "[9, 20]"});
}

TEST(Linalg, IntegerHalfAndEmpty) {
  EXPECT_VALUES(mm(it({1, 2, 3, 4}, {2, 2}), it({5, 6, 7, 8}, {2, 2})), 19, 22, 43, 50);
  Tensor h = ft({1, 2, 3, 4}, {2, 2}).to(DType::Float16);
  Tensor r = mm(h, h);
  EXPECT_EQ(r.dtype(), DType::Float16);
  EXPECT_VALUES(r, 7, 10, 15, 22);
  EXPECT_VALUES(mm(zeros({2, 0}), zeros({0, 3})), 0, 0, 0, 0, 0, 0);
  EXPECT_EQ(mm(zeros({0, 4}), zeros({4, 3})).sizes(), (IntList{0, 3}));
}

}  // namespace trainrun
