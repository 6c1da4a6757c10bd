// The CUDA kernels' per-element code run on the CPU, over CPU buffers, and
// compared with the CPU ops: the elementwise loop's operand addressing with
// the shared math (tensor/elementwise_math.h), the conv and pool elements, and
// the indexing elements. The kernels are grid-stride loops over exactly these
// functions, so their index arithmetic and math are checked on machines
// without a GPU. The reductions' reducers are in reducers_test.cc; scans,
// softmax and the norms (warp shuffles, shared memory) run only in the GPU
// suites.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tensor/cuda/elementwise_launch.h"
#include "tensor/cuda/kernel_geometry.h"
#include "tensor/cuda/kernels/conv_pool_elements.h"
#include "tensor/cpu/convert.h"
#include "tensor/cuda/kernels/index_elements.h"
#include "tensor/generator.h"
#include "tensor/nn_functional.h"
#include "tensor/ops.h"
#include "tests/expect_error.h"

namespace trainrun::cuda {
namespace {

Tensor random(const IntList& shape, uint64_t seed, DType dt = DType::Float32) {
  Generator gen(seed);
  return randn(shape, TensorOptions(DType::Float32), &gen).to(dt);
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what, double rtol = 1e-5,
                  double atol = 1e-6) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_TRUE(allclose(got.to(DType::Float64), want.to(DType::Float64), rtol, atol, /*equal_nan=*/true))
      << what << "\ngot:  " << got.str() << "\nwant: " << want.str();
}

// ---- the elementwise loop: operand pointers + the shared math ----

// Runs `a op b` the way a CUDA launch does: geometry from the iterator, then
// per element its operand pointers and the op's math.
template <BinaryOp op, typename CudaT>
Tensor binary_like_a_kernel(const Tensor& a, const Tensor& b) {
  IteratorConfig config;
  config.op = "kernel_elements_test";
  if (binary_bool_result(op)) config.output_dtype = DType::Bool;
  TensorIterator iter(config, Tensor(), {a, b});
  ElementwiseArgs args = elementwise_geometry(iter);
  for (int64_t i = 0; i < args.numel; ++i) {
    char* p[3];
    operand_pointers<3>(args, i, p, args.scalars);
    using Out = std::conditional_t<binary_bool_result(op), bool, CudaT>;
    store<Out>(p[0], binary_math<op, opmath<CudaT>>(load<CudaT>(p[1]), load<CudaT>(p[2])));
  }
  return iter.output();
}

TEST(KernelElements, ElementwiseLoopAddressesEveryLayout) {
  const Tensor m = random({5, 7}, 1), row = random({7}, 2), col = random({5, 1}, 3);
  const Tensor big = random({4, 6, 9}, 4);
  struct Case {
    std::string name;
    Tensor a, b;
  };
  std::vector<Case> cases = {
      {"contiguous", m, random({5, 7}, 5)},
      {"transposed", transpose(random({7, 5}, 6), 0, 1), m},
      {"broadcast row and column", col, row},
      {"strided slice", big.slice(2, 1, 9, 3), random({4, 6, 3}, 7)},
      {"permuted 3-D", big.permute({2, 0, 1}), random({9, 1, 6}, 8)},
      {"0-dim scalar", m, scalar_tensor(2.5)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    expect_equal(binary_like_a_kernel<BinaryOp::Mul, float>(c.a, c.b), mul(c.a, c.b), c.name + " mul");
    expect_equal(binary_like_a_kernel<BinaryOp::Maximum, float>(c.a, c.b), maximum(c.a, c.b), c.name + " maximum");
    expect_equal(binary_like_a_kernel<BinaryOp::Lt, float>(c.a, c.b), lt(c.a, c.b), c.name + " lt");
  }
}

TEST(KernelElements, ReducedFloatsConvertLikeTheCpu) {
  // __half and __nv_bfloat16 hold the same bits as the CPU's float16 and
  // bfloat16, and round float results the same way.
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = random({6, 5}, 9, dt), b = transpose(random({5, 6}, 10, dt), 0, 1);
    const Tensor got = dt == DType::Float16 ? binary_like_a_kernel<BinaryOp::Div, __half>(a, b)
                                            : binary_like_a_kernel<BinaryOp::Div, __nv_bfloat16>(a, b);
    expect_equal(got, div(a, b), "div", 0, 0);
  }
}

// fill_'s launch: the iterator must span all of x (it once took its shape
// from the 0-dim value and refused every x), in x's own layout.
TEST(KernelElements, FillCoversEveryLayoutOfItsTarget) {
  struct Case {
    std::string name;
    IntList base_shape;
    std::function<Tensor(Tensor&)> view;
  };
  const std::vector<Case> cases = {
      {"contiguous", {6, 4}, [](Tensor& b) { return b; }},
      {"transposed", {6, 4}, [](Tensor& b) { return transpose(b, 0, 1); }},
      {"strided slice", {4, 6, 9}, [](Tensor& b) { return b.slice(2, 1, 9, 3); }},
      {"0-dim", {}, [](Tensor& b) { return b; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor base = zeros(c.base_shape, DType::Float32);
    Tensor x = c.view(base);
    const TensorIterator iter = fill_iterator(x, 2.5);
    ASSERT_EQ(iter.shape(), x.sizes());
    ElementwiseArgs args = elementwise_geometry(iter);
    for (int64_t i = 0; i < args.numel; ++i) {
      char* p[2];
      operand_pointers<2>(args, i, p, args.scalars);
      store<float>(p[0], load<float>(p[1]));
    }
    Tensor want = zeros(c.base_shape, DType::Float32);
    c.view(want).copy_(full({}, 2.5, DType::Float32));  // only the view's elements
    expect_equal(base, want, c.name, 0, 0);
  }
  IteratorConfig config;
  config.op = "fill_";
  config.shape_from_output = true;
  expect_error<ValueError>([&] { TensorIterator(config, zeros({2, 3}), {zeros({4})}); },
                           {"fill_", "cannot be broadcast", "size 3 vs 4"});
  expect_error<ValueError>([&] { TensorIterator(config, zeros({2, 3}), {zeros({1, 2, 3})}); },
                           {"fill_", "shape [1, 2, 3] cannot be broadcast to the output's shape [2, 3]"});
}

// A float goes to uint8 through int64 on both devices (PyTorch's rule): the
// GPU's own float-to-unsigned conversion saturates -1.0 to 0 where the CPU
// gives 255. The static_asserts run the conversions at compile time, where
// an out-of-range float-to-unsigned cast is undefined and refused: a direct
// cast fails to build here, on a machine without a GPU.
TEST(KernelElements, FloatToUint8GoesThroughInt64OnEveryDevice) {
  static_assert(cuda::convert<uint8_t>(-1.0f) == 255);
  static_assert(cuda::convert<uint8_t>(300.0) == 44);
  static_assert(cuda::convert<uint8_t>(-129.5f) == 127);
  static_assert(trainrun::convert<uint8_t>(-1.0f) == 255);
  static_assert(trainrun::convert<uint8_t>(300.0) == 44);
  static_assert(trainrun::convert<uint8_t>(-129.5) == 127);
  EXPECT_EQ(cuda::convert<uint8_t>(__float2half_rn(-2.0f)), 254);
  const Tensor x = tensor<float>({-1, 300, -129.5, 2.7, 255});
  expect_equal(x.to(DType::UInt8), tensor<uint8_t>({255, 44, 127, 2, 255}), "to(uint8)", 0, 0);
}

TEST(KernelElements, IntegerFloorDivisionAndRemainderFollowPython) {
  const Tensor a = tensor<int64_t>({7, -7, 7, -7, 0, 5}), b = tensor<int64_t>({2, 2, -2, -2, 3, -5});
  expect_equal(binary_like_a_kernel<BinaryOp::DivFloor, int64_t>(a, b), div(a, b, "floor"), "floor div");
  expect_equal(binary_like_a_kernel<BinaryOp::Remainder, int64_t>(a, b), remainder(a, b), "remainder");
  // A device cannot raise: an integer division by zero gives 0 there.
  const Tensor zero = tensor<int64_t>({0});
  const Tensor q = binary_like_a_kernel<BinaryOp::DivFloor, int64_t>(tensor<int64_t>({5}), zero);
  EXPECT_EQ(q.item<int64_t>(), 0);
}

// ---- convolution: im2col and col2im around a GEMM ----

struct ConvCase {
  IntList input, weight, stride, padding, dilation;
};

TEST(KernelElements, Im2colThenGemmIsConv2dAndCol2imIsItsInputGradient) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 1}, {1, 2}},
      {{1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}},
      {{2, 1, 9, 8}, {2, 1, 2, 3}, {3, 2}, {2, 1}, {2, 1}},
  };
  uint64_t seed = 20;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(fmt::format("input [{}] weight [{}]", fmt::join(c.input, ","), fmt::join(c.weight, ",")));
    const Tensor x = random(c.input, ++seed), w = random(c.weight, ++seed);
    const ConvArgs a = check_conv_args("conv2d", x, w, c.stride, c.padding, c.dilation, 1);
    const ConvGeometry g = conv_geometry(a);
    const int64_t K = a.C * a.kH * a.kW, L = a.Ho * a.Wo;

    Tensor cols = empty({a.N, K, L});
    for (int64_t i = 0; i < cols.numel(); ++i) im2col_element(x.data<float>(), cols.data<float>(), g, i);
    const Tensor out = matmul(w.reshape({a.O, K}), cols).reshape({a.N, a.O, a.Ho, a.Wo});
    expect_equal(out, conv2d(x, w, {}, c.stride, c.padding, c.dilation), "conv2d", 1e-4, 1e-5);

    const Tensor gy = random({a.N, a.O, a.Ho, a.Wo}, ++seed);
    const Tensor gcols = contiguous(matmul(transpose(w.reshape({a.O, K}), 0, 1), gy.reshape({a.N, a.O, L})));
    Tensor gx = empty(x.sizes());
    for (int64_t i = 0; i < gx.numel(); ++i) col2im_element(gcols.data<float>(), gx.data<float>(), g, i);
    auto [want_gx, unused_w, unused_b] =
        conv2d_backward(gy, x, w, c.stride, c.padding, c.dilation, 1, true, false, false);
    expect_equal(gx, want_gx, "input gradient", 1e-4, 1e-5);
  }
}

// ---- pooling ----

struct PoolCase {
  IntList input, kernel, stride, padding, dilation;
  bool ceil_mode;
};

TEST(KernelElements, PoolsMatchTheCpu) {
  const std::vector<PoolCase> cases = {
      {{2, 3, 8, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{1, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
      {{2, 1, 7, 10}, {3, 2}, {1, 3}, {1, 1}, {2, 1}, false},
  };
  uint64_t seed = 40;
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(fmt::format("input [{}] kernel [{}] ceil {}", fmt::join(c.input, ","), fmt::join(c.kernel, ","),
                             c.ceil_mode));
    Tensor x = random(c.input, ++seed);
    x.data<float>()[5] = std::nanf("");  // NaN wins its windows

    const PoolGeometry mg = pool_geometry(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode, "max_pool2d");
    Tensor out = empty(mg.out_shape), idx = empty(mg.out_shape, TensorOptions(DType::Int64));
    for (int64_t o = 0; o < out.numel(); ++o)
      max_pool2d_element(x.data<float>(), out.data<float>(), idx.data<int64_t>(), pool_args(mg, false), o);
    auto [want, want_idx] = max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
    expect_equal(out, want, "max_pool2d");
    expect_equal(idx, want_idx, "max_pool2d indices");

    if (c.dilation != IntList{1, 1}) continue;  // avg_pool2d has no dilation
    for (bool include_pad : {true, false}) {
      SCOPED_TRACE(include_pad ? "count_include_pad" : "count_exclude_pad");
      const Tensor xa = random(c.input, ++seed);
      const PoolGeometry ag = pool_geometry(xa, c.kernel, c.stride, c.padding, {1, 1}, c.ceil_mode, "avg_pool2d");
      Tensor avg = empty(ag.out_shape);
      for (int64_t o = 0; o < avg.numel(); ++o)
        avg_pool2d_element(xa.data<float>(), avg.data<float>(), pool_args(ag, include_pad), o);
      expect_equal(avg, avg_pool2d(xa, c.kernel, c.stride, c.padding, c.ceil_mode, include_pad), "avg_pool2d");

      const Tensor gy = random(ag.out_shape, ++seed);
      Tensor gx = empty(xa.sizes());
      for (int64_t i = 0; i < gx.numel(); ++i)
        avg_pool2d_backward_element(gy.data<float>(), gx.data<float>(), pool_args(ag, include_pad), i);
      expect_equal(gx, avg_pool2d_backward(gy, xa, c.kernel, c.stride, c.padding, c.ceil_mode, include_pad),
                   "avg_pool2d_backward");
    }
  }
}

// ---- indexing ----

TEST(KernelElements, IndexSelectGatherScatterIndexAddMatchTheCpu) {
  const Tensor x = random({4, 5, 3}, 60);
  const Tensor sel = tensor<int64_t>({4, 0, 4, 2});
  {
    // index_select along dim 1: [outer, size, inner] = [4, 5, 3].
    Tensor out = empty({4, 4, 3});
    for (int64_t p = 0; p < out.numel(); ++p)
      index_select_element(x.data<float>(), out.data<float>(), sel.data<int64_t>(), 4, 5, 3, p);
    expect_equal(out, index_select(x, 1, sel), "index_select");
  }
  Generator gen(61);
  const Tensor idx = randint(0, 5, {4, 3, 3}, DType::Int64, &gen);  // along dim 1 of x, smaller in dim 1
  {
    Tensor out = empty(idx.sizes());
    const IndexGeometry g = index_geometry(idx, x, nullptr, 1);
    for (int64_t p = 0; p < out.numel(); ++p)
      gather_element(x.data<float>(), out.data<float>(), idx.data<int64_t>(), g, p);
    expect_equal(out, gather(x, 1, idx), "gather");
  }
  {
    // scatter from a transposed src (its own strides) and scatter_add with
    // repeated indices; scatter uses unique indices so the result is defined.
    const Tensor src = transpose(random({4, 3, 5}, 62), 1, 2);  // [4, 5, 3], non-contiguous
    const Tensor uniq = contiguous(expand(tensor<int64_t>({3, 0, 4, 1}, {1, 4, 1}), {4, 4, 3}));
    Tensor out = clone(x);
    const IndexGeometry g = index_geometry(uniq, out, &src, 1);
    for (int64_t p = 0; p < uniq.numel(); ++p)
      scatter_element<float, false>(out.data<float>(), src.data<float>(), uniq.data<int64_t>(), g, p);
    expect_equal(out, scatter(x, 1, uniq, src), "scatter");

    Tensor acc = clone(x);
    const IndexGeometry ga = index_geometry(idx, acc, &src, 1);
    for (int64_t p = 0; p < idx.numel(); ++p)
      scatter_element<float, true>(acc.data<float>(), src.data<float>(), idx.data<int64_t>(), ga, p);
    expect_equal(acc, scatter_add(x, 1, idx, src), "scatter_add");
  }
  {
    const Tensor src = random({4, 6, 3}, 63);
    const Tensor rows = tensor<int64_t>({1, 4, 1, 0, 2, 1});
    Tensor out = clone(x);
    const IndexGeometry g = index_geometry(src, out, &src, 1);
    for (int64_t p = 0; p < src.numel(); ++p)
      index_add_element(out.data<float>(), src.data<float>(), rows.data<int64_t>(), g, 0.5f, p);
    expect_equal(out, index_add(x, 1, rows, src, 0.5), "index_add");
  }
}

TEST(KernelElements, MaskedSelectAndNonzeroCompactLikeTheCpu) {
  const Tensor x = random({3, 4, 5}, 70);
  const Tensor mask = gt(x, scalar_tensor(0.3));
  const Tensor positions = cumsum(mask.reshape({-1}), 0, DType::Int64);
  const int64_t count = positions.select(0, positions.numel() - 1).item<int64_t>();
  ASSERT_GT(count, 0);

  Tensor selected = empty({count});
  for (int64_t i = 0; i < x.numel(); ++i)
    masked_compact_element(x.data<float>(), mask.data<bool>(), positions.data<int64_t>(), selected.data<float>(), i);
  expect_equal(selected, masked_select(x, mask), "masked_select");

  Tensor coords = empty({count, 3}, TensorOptions(DType::Int64));
  Sizes sizes{};
  for (int d = 0; d < 3; ++d) sizes.v[d] = x.size(d);
  for (int64_t i = 0; i < x.numel(); ++i)
    nonzero_element(mask.data<bool>(), positions.data<int64_t>(), coords.data<int64_t>(), 3, sizes, i);
  expect_equal(coords, nonzero(mask), "nonzero");
}

}  // namespace
}  // namespace trainrun::cuda
