// The formulas of the reductions, indexing ops, ternary ops and conv2d pass
// gradcheck (and gradgradcheck where double backward is promised). That every
// op with a gradient has a formula is tests/tensor/op_list_test's check.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/dispatcher.h"
#include "tensor/ops.h"
#include "tests/autograd/gradcheck_util.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

TEST(FormulaCoverage, Reductions) {
  manual_seed(11);
  Tensor x = leaf({2, 3, 4}), pos = leaf({2, 3, 4}, 0.5, 1.5);
  check(
      "prod all", [](const TensorList& v) { return prod(v[0]); }, {pos}, true);
  check(
      "prod dim", [](const TensorList& v) { return prod(v[0], {1}); }, {x}, true);
  check("prod keepdim", [](const TensorList& v) { return prod(v[0], {0, 2}, true); }, {x});
  // Zeros: one in a slice (the others' product), two in a slice (zero).
  Tensor z = tensor<double>({0, 2, 3, 4, 0, 0, 1, 2, 3}, {3, 3});
  set_requires_grad(z);
  check("prod one zero", [](const TensorList& v) { return prod(v[0], {1}); }, {z});
  check("amax", [](const TensorList& v) { return amax(v[0], {1}); }, {x});
  check("amin keepdim", [](const TensorList& v) { return amin(v[0], {0, 2}, true); }, {x});
  check("max.dim", [](const TensorList& v) { return std::get<0>(max(v[0], 2)); }, {x});
  check("min.dim keepdim", [](const TensorList& v) { return std::get<0>(min(v[0], 1, true)); }, {x});
  check(
      "var", [](const TensorList& v) { return var(v[0], {1}); }, {x}, true);
  check(
      "var population keepdim",
      [](const TensorList& v) {
        return var(v[0], {0, 2}, 0, true);
      },
      {x}, true);
  check("std", [](const TensorList& v) { return trainrun::std(v[0], {2}); }, {x});
  check(
      "norm 2", [](const TensorList& v) { return norm(v[0], 2.0, {2}); }, {x}, true);
  check("norm 1", [](const TensorList& v) { return norm(v[0], 1.0, {1}); }, {x});
  check("norm 3 all", [](const TensorList& v) { return norm(v[0], 3.0); }, {x});
  check("norm inf", [](const TensorList& v) { return norm(v[0], INFINITY, {2}, true); }, {x});
  check(
      "logsumexp", [](const TensorList& v) { return logsumexp(v[0], {1}); }, {x}, true);
  check(
      "cumsum", [](const TensorList& v) { return cumsum(v[0], 1); }, {x}, true);
  check(
      "cumsum last", [](const TensorList& v) { return cumsum(v[0], -1); }, {transposed_leaf(3, 5)}, true);

  // Ties share the gradient, as PyTorch does.
  Tensor t = tensor<double>({1, 3, 3}, {3});
  set_requires_grad(t);
  backward(amax(t));
  expect_close(grad(t), {0, 0.5, 0.5});
  Tensor n = tensor<double>({0, 0}, {2});
  set_requires_grad(n);
  backward(norm(n, 2.0));
  expect_close(grad(n), {0, 0});  // the subgradient at 0, not NaN
}

TEST(FormulaCoverage, IndexingOps) {
  manual_seed(12);
  Tensor x = leaf({3, 4}), src = leaf({2, 4}), big_src = leaf({3, 5});
  Tensor index = tensor<int64_t>({2, 0, 1, 2, 0, 1, 0, 1}, {2, 4});  // distinct rows per column
  check("scatter", [&](const TensorList& v) { return scatter(v[0], 0, index, v[1]); }, {x, src});
  check("scatter larger src", [&](const TensorList& v) { return scatter(v[0], 0, index, v[1]); }, {x, big_src});
  check("scatter value", [&](const TensorList& v) { return scatter(v[0], 0, index, 2.0); }, {x});
  Tensor repeated = tensor<int64_t>({0, 0, 1, 1, 0, 0, 1, 1}, {2, 4});
  check(
      "scatter_add", [&](const TensorList& v) { return scatter_add(v[0], 0, repeated, v[1]); }, {x, src}, true);
  Tensor rows = tensor<int64_t>({2, 0, 2}, {3});
  check(
      "index_add", [&](const TensorList& v) { return index_add(v[0], 0, rows, v[1], 1.5); }, {x, leaf({3, 4})}, true);
  Tensor mask = gt(rand({4}), 0.5);
  check("masked_select", [&](const TensorList& v) { return masked_select(v[0], mask); }, {x});
  Tensor mask2 = gt(rand({3, 4}), 0.3);
  check("masked_select broadcast x", [&](const TensorList& v) { return masked_select(v[0], mask2); }, {leaf({4})});
  check("sort", [](const TensorList& v) { return std::get<0>(sort(v[0], 1, true)); }, {x});
  check("topk", [](const TensorList& v) { return std::get<0>(topk(v[0], 2, 0)); }, {transposed_leaf(3, 4)});
  check("diagonal", [](const TensorList& v) { return diagonal(v[0], 1); }, {x});
  check("as_strided", [](const TensorList& v) { return as_strided(v[0], {2, 2}, {1, 2}, 1); }, {x});
  check("as_strided overlapping", [](const TensorList& v) { return as_strided(v[0], {3, 3}, {1, 1}); }, {x});
  // Windows of windows (unfold twice): the inner as_strided reads a view that overlaps itself.
  check(
      "as_strided of an overlapping view",
      [](const TensorList& v) { return as_strided(as_strided(v[0], {3, 5, 2}, {5, 1, 5}), {3, 3, 2, 3}, {5, 1, 5, 1}); },
      {leaf({4, 5})});
  check(
      "as_strided of an expanded view", [](const TensorList& v) { return as_strided(expand(v[0], {3, 4}), {2, 2}, {0, 1}); },
      {leaf({4})});
}

TEST(FormulaCoverage, TernaryAndPiecewiseOps) {
  manual_seed(13);
  Tensor a = leaf({3, 4}), row = leaf({4}), col = leaf({3, 1}), pos = leaf({4}, 0.5, 2.0);
  check(
      "addcmul", [](const TensorList& v) { return addcmul(v[0], v[1], v[2], 0.5); }, {a, row, col}, true);
  check(
      "addcdiv", [](const TensorList& v) { return addcdiv(v[0], v[1], v[2], 2.0); }, {col, a, pos}, true);
  check(
      "lerp tensor weight", [](const TensorList& v) { return lerp(v[0], v[1], v[2]); }, {a, row, col}, true);
  check("lerp scalar weight", [](const TensorList& v) { return lerp(v[0], v[1], 0.3); }, {a, row});
  check("clamp", [](const TensorList& v) { return clamp(v[0], -0.5, 0.5); }, {a});
  check("clamp min only", [](const TensorList& v) { return clamp(v[0], 0.0, std::nullopt); }, {a});
  check("remainder", [](const TensorList& v) { return remainder(v[0], v[1]); }, {leaf({3, 4}, 0.1, 5.0), pos});
  // Piecewise-constant ops pass zeros (gradcheck agrees away from the jumps).
  check("floor", [](const TensorList& v) { return floor(v[0]); }, {leaf({5}, 0.1, 0.9)});
  check("round", [](const TensorList& v) { return round(v[0]); }, {leaf({5}, 0.1, 0.4)});
  check("sign", [](const TensorList& v) { return sign(v[0]); }, {leaf({5}, 0.1, 0.9)});
  check("div floor", [](const TensorList& v) { return div(v[0], v[1], "floor"); }, {leaf({4}, 0.1, 0.9), pos});
}

TEST(FormulaCoverage, Conv2dAndPooling) {
  manual_seed(14);
  struct Case {
    IntList in, w;
    IntList stride, pad, dil;
    int64_t groups;
    bool bias;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
                                         {{1, 4, 7, 7}, {4, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, false},
                                         {{3, 5, 5}, {2, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
                                         {{1, 2, 6, 6}, {2, 1, 3, 3}, {2, 2}, {2, 1}, {1, 1}, 2, true}}) {
    Tensor x = leaf(c.in), w = leaf(c.w), b = c.bias ? leaf({c.w[0]}) : Tensor();
    TensorList inputs{x, w};
    if (c.bias) inputs.push_back(b);
    check(
        "conv2d",
        [&](const TensorList& v) {
          return conv2d(v[0], v[1], c.bias ? v[2] : Tensor(), c.stride, c.pad, c.dil, c.groups);
        },
        inputs, /*second_order=*/true);
    // float32 goes through oneDNN's backward primitives: same gradients.
    Tensor x32 = detach(x).to(DType::Float32), w32 = detach(w).to(DType::Float32);
    Tensor b32 = c.bias ? detach(b).to(DType::Float32) : Tensor();
    set_requires_grad(x32), set_requires_grad(w32);
    if (c.bias) set_requires_grad(b32);
    Tensor gy = randn(conv2d(detach(x), detach(w), Tensor(), c.stride, c.pad, c.dil, c.groups).sizes(), DType::Float64);
    backward(sum(mul(conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups), gy)));
    backward(sum(mul(conv2d(x32, w32, b32, c.stride, c.pad, c.dil, c.groups), gy.to(DType::Float32))));
    EXPECT_TRUE(allclose(grad(x32).to(DType::Float64), grad(x), 1e-4, 1e-4));
    EXPECT_TRUE(allclose(grad(w32).to(DType::Float64), grad(w), 1e-4, 1e-4));
    if (c.bias) {
      EXPECT_TRUE(allclose(grad(b32).to(DType::Float64), grad(b), 1e-4, 1e-4));
    }
  }
  // Only the input needs a gradient: the weight's is not computed.
  Tensor x = leaf({1, 2, 4, 4});
  Tensor w = randn({3, 2, 3, 3}, DType::Float64);
  backward(sum(conv2d(x, w)));
  EXPECT_TRUE(grad(x).defined());
  EXPECT_FALSE(grad(w).defined());
  check(
      "avg_pool2d double backward",
      [](const TensorList& v) {
        return avg_pool2d(v[0], {2, 2}, {1, 1}, {1, 1}, false, false);
      },
      {leaf({1, 2, 4, 5})}, true);
}

}  // namespace
}  // namespace trainrun
