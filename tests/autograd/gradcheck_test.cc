// Every backward formula against finite differences (float64), on
// contiguous, transposed (non-contiguous) and broadcast inputs; double
// backward where the formulas support it.
#include <gtest/gtest.h>

#include "autograd/custom_op.h"
#include "autograd/engine.h"
#include "autograd/functions/record.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "nn/attention.h"
#include "tensor/ops.h"
#include "tests/autograd/gradcheck_util.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

TEST(Gradcheck, UnaryOps) {
  manual_seed(1);
  Tensor x = leaf({3, 4}), pos = leaf({3, 4}, 0.5, 2.0), xt = transposed_leaf(3, 4);
  check("neg", [](const TensorList& v) { return neg(v[0]); }, {x}, true);
  check("exp", [](const TensorList& v) { return exp(v[0]); }, {x}, true);
  check("log", [](const TensorList& v) { return log(v[0]); }, {pos}, true);
  check("log1p", [](const TensorList& v) { return log1p(v[0]); }, {pos});
  check("sqrt", [](const TensorList& v) { return sqrt(v[0]); }, {pos}, true);
  check("rsqrt", [](const TensorList& v) { return rsqrt(v[0]); }, {pos});
  check("sin", [](const TensorList& v) { return sin(v[0]); }, {x}, true);
  check("cos", [](const TensorList& v) { return cos(v[0]); }, {xt}, true);
  check("tanh", [](const TensorList& v) { return tanh(v[0]); }, {xt}, true);
  check("sigmoid", [](const TensorList& v) { return sigmoid(v[0]); }, {x}, true);
  check("relu", [](const TensorList& v) { return relu(v[0]); }, {x});
  check("abs", [](const TensorList& v) { return abs(v[0]); }, {x});
  check("silu", [](const TensorList& v) { return silu(v[0]); }, {xt});
  check("erf", [](const TensorList& v) { return erf(v[0]); }, {x});
  check("gelu", [](const TensorList& v) { return gelu(v[0]); }, {x});
  check("gelu tanh", [](const TensorList& v) { return gelu(v[0], "tanh"); }, {xt});
}

TEST(Gradcheck, BinaryOpsWithBroadcasting) {
  manual_seed(2);
  Tensor a = leaf({3, 4}), row = leaf({4}), col = leaf({3, 1}), at = transposed_leaf(3, 4);
  Tensor pos = leaf({3, 4}, 0.5, 2.0), prow = leaf({4}, 0.5, 2.0);
  check("add", [](const TensorList& v) { return add(v[0], v[1]); }, {a, row}, true);
  check("add alpha", [](const TensorList& v) { return add(v[0], v[1], 2.5); }, {at, col});
  check("sub", [](const TensorList& v) { return sub(v[0], v[1]); }, {col, row}, true);
  check("mul", [](const TensorList& v) { return mul(v[0], v[1]); }, {at, row}, true);
  check("div", [](const TensorList& v) { return div(v[0], v[1]); }, {a, prow}, true);
  check("pow", [](const TensorList& v) { return pow(v[0], v[1]); }, {pos, row});
  check("pow scalar", [](const TensorList& v) { return pow(v[0], 3); }, {a});
  check("maximum", [](const TensorList& v) { return maximum(v[0], v[1]); }, {a, col});
  check("minimum", [](const TensorList& v) { return minimum(v[0], v[1]); }, {at, row});
  check("scalar ops", [](const TensorList& v) { return mul(add(v[0], 1.5), 2.0); }, {a});
}

TEST(Gradcheck, ReductionsAndProducts) {
  manual_seed(3);
  Tensor x = leaf({2, 3, 4}), a = leaf({3, 5}), b = leaf({5, 2}), bt = transposed_leaf(5, 2);
  Tensor ba = leaf({2, 3, 4}), bb = leaf({2, 4, 2}), v = leaf({5});
  check("sum all", [](const TensorList& t) { return sum(t[0]); }, {x}, true);
  check("sum dims", [](const TensorList& t) { return sum(t[0], {0, 2}); }, {x}, true);
  check("sum keepdim", [](const TensorList& t) { return sum(t[0], {-1}, true); }, {x});
  check("mean", [](const TensorList& t) { return mean(t[0], {1}); }, {x}, true);
  check("mm", [](const TensorList& t) { return mm(t[0], t[1]); }, {a, bt}, true);
  check("matmul batched", [](const TensorList& t) { return matmul(t[0], t[1]); }, {ba, bb}, true);
  check("matmul broadcast", [](const TensorList& t) { return matmul(t[0], t[1]); }, {ba, leaf({4, 3})});
  check("mv", [](const TensorList& t) { return mv(t[0], t[1]); }, {a, v});
  check("dot", [](const TensorList& t) { return dot(t[0], t[1]); }, {v, leaf({5})});
  check("addmm", [](const TensorList& t) { return addmm(t[0], t[1], t[2], 0.5, 2.0); }, {leaf({2}), a, b});
  // Batches stored transposed (attention's K^T): their gradients are computed in that layout.
  Tensor kt = transpose(rand({2, 2, 4}, DType::Float64), 1, 2), qt = transpose(rand({2, 4, 3}, DType::Float64), 1, 2);
  set_requires_grad(kt);
  set_requires_grad(qt);
  check("bmm of a transposed batch", [](const TensorList& t) { return bmm(t[0], t[1]); }, {ba, kt}, true);
  check("baddbmm of transposed batches",
        [](const TensorList& t) { return baddbmm(t[0], t[1], t[2], 0.5, 1.5); }, {leaf({2, 3, 2}), qt, kt}, true);
}

TEST(Gradcheck, AttentionKeysGradientComesOutContiguous) {
  // q @ k^T with k^T a transposed view: the key's gradient is laid out as the key is (PyTorch's formula gives
  // a transposed one, which merging heads then copies element by element).
  manual_seed(4);
  Tensor q = leaf({3, 5, 4}), k = leaf({3, 5, 4});
  backward(sum(bmm(q, transpose(k, 1, 2))));
  const Tensor gk = grad(k);
  ASSERT_TRUE(gk.defined());
  EXPECT_TRUE(gk.is_contiguous());
  // (the value: sum over rows of q, per batch, for every key row)
  EXPECT_TRUE(allclose(gk, expand(sum(q, {1}, true), {3, 5, 4}), 1e-10, 1e-10));
}

TEST(Gradcheck, Views) {
  manual_seed(4);
  Tensor x = leaf({2, 3, 4}), xt = transposed_leaf(4, 3);
  check("view", [](const TensorList& t) { return mul(t[0].view({6, 4}), 2.0); }, {x});
  check("reshape of non-contiguous", [](const TensorList& t) { return reshape(t[0], {12}); }, {xt});
  check("permute", [](const TensorList& t) { return permute(t[0], {2, 0, 1}); }, {x});
  check("transpose", [](const TensorList& t) { return transpose(t[0], 0, 2); }, {x});
  check("expand", [](const TensorList& t) { return expand(t[0], {3, 4, 3}); }, {leaf({4, 1})});
  check("unsqueeze/squeeze", [](const TensorList& t) { return squeeze(unsqueeze(t[0], 1), 1); }, {xt});
  check("select", [](const TensorList& t) { return select(t[0], 1, 2); }, {x});
  check("narrow", [](const TensorList& t) { return narrow(t[0], 2, 1, 2); }, {x});
  check("slice step", [](const TensorList& t) { return slice(t[0], 2, 0, 4, 2); }, {x});
  check("contiguous", [](const TensorList& t) { return contiguous(t[0]); }, {xt});
  check("flatten", [](const TensorList& t) { return flatten(t[0], 1); }, {x});
}

TEST(Gradcheck, NNBuildingBlocks) {
  manual_seed(5);
  Tensor x = leaf({3, 5}), xt = transposed_leaf(3, 5);
  check("softmax", [](const TensorList& t) { return softmax(t[0], 1); }, {x}, true);
  check("log_softmax", [](const TensorList& t) { return log_softmax(t[0], 0); }, {xt}, true);
  Tensor target = tensor<int64_t>({1, 4, 0}, {3});
  check("cross_entropy", [&](const TensorList& t) { return cross_entropy(t[0], target); }, {x});
  Tensor idx = tensor<int64_t>({2, 0, 2, 1}, {4});
  check("embedding", [&](const TensorList& t) { return embedding(t[0], idx); }, {leaf({3, 2})});
  Tensor x3 = leaf({2, 3, 4}), w = leaf({4}), b = leaf({4}), w2 = leaf({3, 4});
  check("layer_norm", [](const TensorList& t) { return std::get<0>(layer_norm(t[0], {4}, t[1], t[2], 1e-5)); },
        {x3, w, b});
  check("layer_norm 2 dims, no affine",
        [](const TensorList& t) { return std::get<0>(layer_norm(t[0], {3, 4}, Tensor(), Tensor(), 1e-5)); }, {x3});
  check("rms_norm", [](const TensorList& t) { return std::get<0>(rms_norm(t[0], {3, 4}, t[1], 1e-6)); }, {x3, w2});
  // Distinct values, so that the winner of each window is not a tie.
  Tensor img = leaf({2, 3, 5, 6});
  {
    Tensor ramp = reshape(mul(arange(180, DType::Float64), 0.01), {2, 3, 5, 6});
    NoGradGuard no_grad;
    add_(img, ramp);
  }
  check("max_pool2d", [](const TensorList& t) { return std::get<0>(max_pool2d(t[0], {2, 2}, {2, 2})); }, {img});
  check("max_pool2d padded, dilated",
        [](const TensorList& t) { return std::get<0>(max_pool2d(t[0], {3, 3}, {1, 2}, {1, 1}, {1, 1}, true)); },
        {img});
  check("avg_pool2d", [](const TensorList& t) { return avg_pool2d(t[0], {2, 3}, {2, 2}); }, {img});
  check("avg_pool2d ceil, padded, count_include_pad off",
        [](const TensorList& t) { return avg_pool2d(t[0], {3, 3}, {2, 2}, {1, 1}, true, false); }, {img});
  check("avg_pool2d padded, counting the padding",
        [](const TensorList& t) { return avg_pool2d(t[0], {3, 2}, {1, 2}, {1, 1}, false, true); }, {img});
  check("gather", [](const TensorList& t) { return gather(t[0], 1, tensor<int64_t>({0, 4, 2, 2, 1, 1}, {3, 2})); },
        {x});
}


// gradcheck must catch a wrong formula; this also shows the C++ way to give
// an op-like function its own backward (record, from autograd/functions).
TEST(Gradcheck, CatchesAWrongFormula) {
  manual_seed(6);
  Tensor x = leaf({4});
  auto square = [](bool correct) {
    return [correct](const TensorList& v) {
      const Tensor& in = v[0];
      return record(
          "SquareBackward", {in}, {in}, false, [&] { return mul(in, in); },
          [correct](const Tensor& g, const TensorList& s) -> TensorList {
            return {mul(mul(g, s[0]), correct ? 2.0 : 1.9)};
          });
    };
  };
  EXPECT_TRUE(gradcheck(square(true), {x}));
  try {
    gradcheck(square(false), {x});
    ADD_FAILURE() << "a wrong formula passed gradcheck";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Jacobian mismatch"), std::string::npos) << e.what();
  }
  Tensor f32 = randn({2});
  set_requires_grad(f32);
  EXPECT_THROW(gradcheck([](const TensorList& v) { return v[0]; }, {f32}), ValueError);
}

TEST(Gradcheck, CatAndStack) {
  manual_seed(8);
  Tensor a = leaf({2, 3}), b = leaf({1, 3}), c = transposed_leaf(2, 4);
  check("cat", [](const TensorList& t) { return cat({t[0], t[1]}, 0); }, {a, b}, true);
  check("cat dim 1", [](const TensorList& t) { return cat({t[0], t[1]}, 1); }, {a, c});
  check("stack", [](const TensorList& t) { return stack({t[0], t[1]}, 1); }, {a, leaf({2, 3})});
}


TEST(Gradcheck, ScaledDotProductAttention) {
  manual_seed(9);
  Tensor q = leaf({2, 3, 4}), k = leaf({2, 5, 4}), v = leaf({2, 5, 2});
  check("sdpa", [](const TensorList& t) { return nn::scaled_dot_product_attention(t[0], t[1], t[2]); }, {q, k, v});
  Tensor qc = leaf({2, 4, 3}), kc = leaf({2, 4, 3}), vc = leaf({2, 4, 3});
  check("sdpa causal",
        [](const TensorList& t) { return nn::scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), true); },
        {qc, kc, vc});
  Tensor mask = tensor<bool>({true, false, true, true, true, false, true, true, true, true, false, true, true, true,
                              true},
                             {3, 5});
  check("sdpa bool mask",
        [&](const TensorList& t) { return nn::scaled_dot_product_attention(t[0], t[1], t[2], mask); }, {q, k, v});
}


TEST(CustomOp, RegisteredOpDispatchesAndDifferentiates) {
  CustomOpDefinition def;
  def.cpu = [](const TensorList& in) { return mul(mul(in[0], in[0]), in[1]); };  // s * x^2
  def.backward = [](const Tensor& g, const TensorList& in, const Tensor&) -> TensorList {
    return {mul(mul(g, in[1]), mul(in[0], 2.0)), sum_to(mul(g, mul(in[0], in[0])), in[1].sizes())};
  };
  CustomOp scaled_square = register_custom_op("test_ext::scaled_square", def);
  Tensor x = tensor<float>({1, 2, 3}, {3}), s = tensor<float>({2}, {1});
  EXPECT_VALUES(scaled_square({x, s}), 2, 8, 18);
  manual_seed(13);
  check("custom op", [&](const TensorList& t) { return scaled_square(t); }, {leaf({4}), leaf({1})});
  EXPECT_EQ(grad_fn(scaled_square({leaf({2}), leaf({1})}))->name(), "test_ext::scaled_squareBackward");

  CustomOpDefinition no_grad_def;
  no_grad_def.cpu = [](const TensorList& in) { return neg(in[0]); };
  CustomOp forward_only = register_custom_op("test_ext::forward_only", no_grad_def);
  EXPECT_VALUES(forward_only({x}), -1, -2, -3);
  try {
    forward_only({leaf({2})});
    ADD_FAILURE() << "an op without a backward accepted an input that needs a gradient";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("test_ext::forward_only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(register_custom_op("test_ext::scaled_square", def), ValueError);
  EXPECT_THROW(register_custom_op("no_namespace", def), ValueError);
  EXPECT_THROW(register_custom_op("test_ext::no_cpu", CustomOpDefinition{}), ValueError);
}

}  // namespace
}  // namespace trainrun
