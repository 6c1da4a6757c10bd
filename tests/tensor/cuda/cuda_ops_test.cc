// Every CUDA kernel against the CPU's result: elementwise ops over dtypes,
// broadcasting, strided views and CPU scalars; copies between host and device
// and between dtypes; reductions over short, long and split rows; matrix
// products. Skipped, with the reason, when no GPU is usable.
#include <gtest/gtest.h>

#include "tensor/random_draw.h"
#include "tests/tensor/cuda/gpu_test_util.h"

namespace trainrun::cuda {
namespace {

Tensor sample(IntList shape, DType dt, uint64_t seed, double lo = -3, double hi = 3) {
  Generator g(seed);
  Tensor x = rand(shape, DType::Float64, &g);
  x = add(mul(x, scalar_tensor(hi - lo)), scalar_tensor(lo));
  if (!is_floating(dt)) x = floor(x);
  if (dt == DType::UInt8 || dt == DType::Bool) x = abs(x);
  return x.to(dt);
}

const DType kAllDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64,
                            DType::Int64,   DType::Int32,   DType::UInt8,    DType::Bool};
const DType kFloatDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};

class CudaOps : public GpuTest {};

TEST_F(CudaOps, CopiesRoundTripEveryDTypeAndLayout) {
  for (DType dt : kAllDTypes) {
    Tensor x = sample({5, 7}, dt, 1);
    Tensor g = x.cuda();
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.device().index, 0);
    expect_same(g, x, 0, 0, dtype_name(dt));
    expect_same(transpose(g, 0, 1).cpu(), transpose(x, 0, 1), 0, 0, "transposed");
    expect_same(contiguous(transpose(g, 0, 1)), contiguous(transpose(x, 0, 1)), 0, 0, "contiguous on device");
    for (DType to_dt : kAllDTypes) expect_same(g.to(to_dt), x.to(to_dt), 0, 0, "convert on device");
  }
  // Into a strided destination on each side.
  Tensor x = sample({4, 6}, DType::Float32, 2);
  Tensor dst = zeros({6, 4}, TensorOptions(DType::Float32, kCuda));
  Tensor view = transpose(dst, 0, 1);
  view.copy_(x);
  expect_same(view, x, 0, 0, "host to strided device");
  Tensor host = zeros({6, 4}, DType::Float32);
  Tensor host_view = transpose(host, 0, 1);
  host_view.copy_(x.cuda());
  expect_same(host_view, x, 0, 0, "device to strided host");
  // Broadcasting source.
  Tensor row = sample({6}, DType::Float32, 3).cuda();
  Tensor full_rows = zeros({3, 6}, TensorOptions(DType::Float32, kCuda));
  full_rows.copy_(row);
  expect_same(full_rows, expand(row.cpu(), {3, 6}).contiguous(), 0, 0, "broadcast copy");
}

TEST_F(CudaOps, FactoriesOnTheDeviceMatchTheCpu) {
  expect_same(zeros({3, 4}, TensorOptions(DType::Float16, kCuda)), zeros({3, 4}, DType::Float16), 0, 0);
  expect_same(full({5}, 2.5, TensorOptions(DType::BFloat16, kCuda)), full({5}, 2.5, DType::BFloat16), 0, 0);
  expect_same(arange(0, 10, 3, TensorOptions(DType::Int64, kCuda)), arange(0, 10, 3, DType::Int64), 0, 0);
  expect_same(eye(4, 3, TensorOptions(DType::Float32, kCuda)), eye(4, 3, DType::Float32), 0, 0);
}

// Random draws on the GPU are Philox counters (tensor/random_draw.h), as PyTorch's CUDA generator: not the CPU's
// Mersenne Twister, so they are checked against the counter formula evaluated here on the host. The generator's
// offset says which counters a draw took; the next draw starts after them.
TEST_F(CudaOps, RandomDrawsAreThePhiloxCountersOfTheGenerator) {
  Generator g(7);
  auto expect_philox = [&](const Tensor& drawn, RandomDistribution dist, double a, double b, uint64_t first,
                           double rtol, const char* what) {
    const bool two_words = random_uses_two_words(dist, drawn.dtype() == DType::Float64, a, b);
    Tensor want = empty({drawn.numel()}, DType::Float64);
    for (int64_t i = 0; i < drawn.numel(); ++i)
      want.data<double>()[i] = random_value(dist, two_words, a, b, g.seed(), first, i);
    expect_same(drawn, want.to(drawn.dtype()), rtol, 0, what);
  };
  uint64_t first = g.offset();
  expect_philox(randn({1001}, TensorOptions(DType::Float32, kCuda), &g), RandomDistribution::Normal, 0, 1, first,
                1e-6, "randn");  // (up to the last bit of the device's log and cos)
  EXPECT_EQ(g.offset(), first + 1001) << "a draw of n elements takes n counters";
  first = g.offset();
  expect_philox(rand({513}, TensorOptions(DType::Float64, kCuda), &g), RandomDistribution::Uniform, 0, 1, first, 0,
                "rand");
  first = g.offset();
  expect_philox(randint(-5, 9, {77}, TensorOptions(DType::Int64, kCuda), &g), RandomDistribution::RandInt, -5, 9,
                first, 0, "randint");
  first = g.offset();
  Tensor bits = empty({300}, TensorOptions(DType::BFloat16, kCuda));
  expect_philox(bernoulli_(bits, 0.3, &g), RandomDistribution::Bernoulli, 0.3, 0, first, 0, "bernoulli");
  // The same seed gives the same values; the statistics are the distribution's.
  Generator again(7), once_more(7);
  expect_same(randn({1001}, TensorOptions(DType::Float32, kCuda), &again),
              randn({1001}, TensorOptions(DType::Float32, kCuda), &once_more).cpu(), 0, 0, "randn reseeded");
  Tensor many = randn({1 << 20}, TensorOptions(DType::Float32, kCuda), &g).cpu().to(DType::Float64);
  const double mean = sum(many).item<double>() / many.numel();
  const double var = sum(mul(many, many)).item<double>() / many.numel() - mean * mean;
  EXPECT_NEAR(mean, 0, 5e-3);
  EXPECT_NEAR(var, 1, 5e-3);
}

TEST_F(CudaOps, BinaryOpsMatchTheCpuForEveryDType) {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  struct Case { const char* name; Fn fn; bool numeric_only; bool integral_only; };
  const Case cases[] = {
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, false, false},
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, false, false},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, false, false},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, false, false},
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, false, false},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, false, false},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, false, false},
      {"logical_xor", [](const Tensor& a, const Tensor& b) { return logical_xor(a, b); }, false, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, true, false},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, true, false},
      {"bitwise_and", [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }, false, true},
  };
  for (DType dt : kAllDTypes) {
    // b has no zeros, so integer division is defined on both devices.
    Tensor a = sample({4, 1, 6}, dt, 10), b = add(abs(sample({3, 1}, dt, 11)), scalar_tensor(1).to(dt));
    for (const Case& c : cases) {
      if (c.numeric_only && dt == DType::Bool) continue;
      if (c.integral_only && is_floating(dt)) continue;
      const std::string what = std::string(c.name) + " " + dtype_name(dt);
      expect_same(c.fn(a.cuda(), b.cuda()), c.fn(a, b), rtol_for(dt), 1e-6, what);
      // A transposed (strided) operand and a CPU scalar operand.
      Tensor at = transpose(a, 0, 2);
      expect_same(c.fn(at.cuda(), b.cuda().view({1, 3, 1})), c.fn(at, b.view({1, 3, 1})), rtol_for(dt), 1e-6,
                  what + " strided");
      Tensor s = scalar_tensor(2).to(dt);
      expect_same(c.fn(a.cuda(), s), c.fn(a, s), rtol_for(dt), 1e-6, what + " cpu scalar");
    }
  }
  Tensor x = sample({9}, DType::Float32, 12), y = sample({9}, DType::Float32, 13);
  expect_same(div(x.cuda(), y.cuda(), "floor"), div(x, y, "floor"), 1e-6);
  expect_same(remainder(x.cuda(), y.cuda()), remainder(x, y), 1e-5, 1e-5);
  expect_same(pow(abs(x).cuda(), y.cuda()), pow(abs(x), y), 1e-5);
  expect_same(where(gt(x, y).cuda(), x.cuda(), y.cuda()), where(gt(x, y), x, y), 0, 0);
}

TEST_F(CudaOps, UnaryOpsMatchTheCpu) {
  for (DType dt : kFloatDTypes) {
    Tensor x = sample({33, 17}, dt, 20);
    Tensor pos = add(abs(x), scalar_tensor(0.1).to(dt));
    const std::string d = dtype_name(dt);
    const double r = rtol_for(dt) * 4;
    expect_same(exp(x.cuda()), exp(x), r, 1e-5, "exp " + d);
    expect_same(log(pos.cuda()), log(pos), r, 1e-5, "log " + d);
    expect_same(sqrt(pos.cuda()), sqrt(pos), r, 1e-5, "sqrt " + d);
    expect_same(tanh(x.cuda()), tanh(x), r, 1e-5, "tanh " + d);
    expect_same(sigmoid(x.cuda()), sigmoid(x), r, 1e-5, "sigmoid " + d);
    expect_same(silu(x.cuda()), silu(x), r, 1e-5, "silu " + d);
    expect_same(gelu(x.cuda(), "none"), gelu(x, "none"), r, 1e-5, "gelu " + d);
    expect_same(gelu(x.cuda(), "tanh"), gelu(x, "tanh"), r, 1e-5, "gelu tanh " + d);
    expect_same(relu(x.cuda()), relu(x), 0, 0, "relu " + d);
    expect_same(neg(x.cuda()), neg(x), 0, 0, "neg " + d);
    expect_same(clamp(x.cuda(), Scalar(-1.0), Scalar(0.5)), clamp(x, Scalar(-1.0), Scalar(0.5)), 0, 0, "clamp " + d);
  }
  Tensor i = sample({10}, DType::Int64, 21);
  expect_same(abs(i.cuda()), abs(i), 0, 0);
  expect_same(exp(i.cuda()), exp(i), 1e-5, 1e-6, "integers promote to float");
  expect_same(bitwise_not(i.cuda()), bitwise_not(i), 0, 0);
  expect_same(logical_not(i.cuda()), logical_not(i), 0, 0);
}

TEST_F(CudaOps, ReductionsMatchTheCpuOnShortLongAndSplitRows) {
  const IntList shapes[] = {{7, 13}, {3, 5000}, {2, 1 << 20}, {100000, 3}};
  for (const IntList& shape : shapes) {
    for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
      Tensor x = sample(shape, dt, 30);
      Tensor g = x.cuda();
      const std::string what = fmt::format("{} {}", fmt::join(shape, "x"), dtype_name(dt));
      const double r = dt == DType::Float32 ? 1e-4 : rtol_for(dt) * 4;
      expect_same(sum(g, {1}), sum(x, {1}), r, 1e-3, "sum rows " + what);
      expect_same(sum(g, {0}), sum(x, {0}), r, 1e-3, "sum cols " + what);
      expect_same(sum(g), sum(x), r, 1e-2, "sum all " + what);
      expect_same(mean(g, {1}, true), mean(x, {1}, true), r, 1e-4, "mean " + what);
      expect_same(amax(g, {1}), amax(x, {1}), 0, 0, "amax " + what);
      expect_same(amin(g, {0}), amin(x, {0}), 0, 0, "amin " + what);
      expect_same(argmax(g, 1), argmax(x, 1), 0, 0, "argmax " + what);
      expect_same(argmin(g), argmin(x), 0, 0, "argmin all " + what);
      auto [gv, gi] = max(g, 1);
      auto [cv, ci] = max(x, 1);
      expect_same(gv, cv, 0, 0, "max values " + what);
      expect_same(gi, ci, 0, 0, "max indices " + what);
      expect_same(var(g, {1}), var(x, {1}), r * 10, 1e-4, "var " + what);
      expect_same(norm(g, 2, {1}), norm(x, 2, {1}), r, 1e-4, "norm2 " + what);
      expect_same(norm(g, 1, {1}), norm(x, 1, {1}), r, 1e-3, "norm1 " + what);
      expect_same(logsumexp(g, {1}), logsumexp(x, {1}), r, 1e-4, "logsumexp " + what);
    }
  }
  Tensor ints = sample({6, 9}, DType::Int32, 31);
  expect_same(sum(ints.cuda(), {1}), sum(ints, {1}), 0, 0, "int sum is int64");
  expect_same(prod(ints.cuda(), {0}), prod(ints, {0}), 0, 0);
  expect_same(all(ints.cuda(), {1}), all(ints, {1}), 0, 0);
  expect_same(any(ints.cuda(), {0}), any(ints, {0}), 0, 0);
  expect_same(cumsum(ints.cuda(), 1), cumsum(ints, 1), 0, 0);
  Tensor f = sample({3, 700}, DType::Float32, 32);
  expect_same(cumsum(f.cuda(), 1), cumsum(f, 1), 1e-4, 1e-4);
  // NaN wins max, first index wins ties.
  Tensor t = tensor<float>({1, 5, 5, NAN, 2, 5}, {2, 3});
  expect_same(amax(t.cuda(), {1}), amax(t, {1}), 0, 0);
  expect_same(argmax(t.cuda(), 1), argmax(t, 1), 0, 0);
}

TEST_F(CudaOps, MatrixProductsMatchTheCpu) {
  for (DType dt : kFloatDTypes) {
    Tensor a = sample({64, 48}, dt, 40, -1, 1), b = sample({48, 80}, dt, 41, -1, 1);
    Tensor bias = sample({80}, dt, 42, -1, 1);
    const std::string d = dtype_name(dt);
    const double r = dt == DType::Float32 ? 1e-4 : rtol_for(dt) * 8;
    expect_same(mm(a.cuda(), b.cuda()), mm(a, b), r, 1e-3, "mm " + d);
    expect_same(mm(transpose(b, 0, 1).cuda(), transpose(a, 0, 1).cuda()), mm(transpose(b, 0, 1), transpose(a, 0, 1)),
                r, 1e-3, "mm transposed " + d);
    expect_same(addmm(bias.cuda(), a.cuda(), b.cuda(), 0.5, 2.0), addmm(bias, a, b, 0.5, 2.0), r, 1e-3, "addmm " + d);
    Tensor x = sample({5, 7, 9}, dt, 43, -1, 1), y = sample({5, 9, 3}, dt, 44, -1, 1);
    expect_same(bmm(x.cuda(), y.cuda()), bmm(x, y), r, 1e-3, "bmm " + d);
    expect_same(matmul(x.cuda(), select(y, 0, 0).cuda()), matmul(x, select(y, 0, 0)), r, 1e-3, "matmul broadcast " + d);
  }
}

}  // namespace
}  // namespace trainrun::cuda
