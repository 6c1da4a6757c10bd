// The engine and the tensor-level API: accumulation, retain_graph, version
// checks on saved tensors, hooks and their order, queue_callback,
// autograd::grad, double backward, grad modes, and clear errors.
#include <gtest/gtest.h>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

Tensor leaf(std::vector<float> v) {
  Tensor t = tensor<float>(v, {static_cast<int64_t>(v.size())});
  return set_requires_grad(t);
}

// Ties, which gradcheck's random inputs never produce, follow PyTorch:
// maximum/minimum split a tie's gradient evenly between the two sides,
// amax/amin evenly between the tied elements, and max/min along a dim give
// it to the index they returned (the first).
TEST(Engine, TiesShareOrPickTheGradientAsPyTorch) {
  const double third = static_cast<float>(1.0 / 3);  // as float32 holds it
  Tensor a = leaf({1, 2, 3}), b = leaf({1, 5, 3});
  backward(sum(maximum(a, b)));
  EXPECT_VALUES(grad(a), 0.5, 0, 0.5);
  EXPECT_VALUES(grad(b), 0.5, 1, 0.5);
  Tensor c = leaf({1, 2, 3}), d = leaf({1, 5, 3});
  backward(sum(minimum(c, d)));
  EXPECT_VALUES(grad(c), 0.5, 1, 0.5);
  EXPECT_VALUES(grad(d), 0.5, 0, 0.5);
  Tensor x = leaf({2, 5, 5, 7, 7, 7});
  backward(sum(amax(x.view({2, 3}), {1})));
  EXPECT_VALUES(grad(x), 0, 0.5, 0.5, third, third, third);
  Tensor y = leaf({4, 1, 1, 0, 0, 9});
  backward(sum(amin(y.view({2, 3}), {1})));
  EXPECT_VALUES(grad(y), 0, 0.5, 0.5, 0.5, 0.5, 0);
  Tensor z = leaf({2, 5, 5, 7, 7, 7});
  backward(sum(amax(z)));  // over all dims: three-way tie
  EXPECT_VALUES(grad(z), 0, 0, 0, third, third, third);
  Tensor m = leaf({2, 5, 5, 7, 7, 7});
  auto [values, indices] = max(m.view({2, 3}), 1);
  EXPECT_VALUES(indices, 1, 0);
  backward(sum(values));
  EXPECT_VALUES(grad(m), 0, 1, 0, 1, 0, 0);
  Tensor n = leaf({4, 1, 1, 0, 0, 9});
  auto [low, low_at] = min(n.view({2, 3}), 1);
  EXPECT_VALUES(low_at, 1, 0);
  backward(sum(low));
  EXPECT_VALUES(grad(n), 0, 1, 0, 1, 0, 0);
}

// A hook registered on a leaf before any graph uses it, and kept for every
// later graph (the leaf's accumulator node is made anew for each).
TEST(Engine, LeafHooksRunInEveryLaterGraph) {
  Tensor x = leaf({1, 2});
  int calls = 0;
  register_hook(x, [&calls](const Tensor& g) {
    ++calls;
    return mul(g, 10.0);
  });
  backward(sum(mul(x, 3.0)));
  EXPECT_EQ(calls, 1);
  EXPECT_VALUES(grad(x), 30, 30);
  backward(sum(x));  // a second, separate graph
  EXPECT_EQ(calls, 2);
  EXPECT_VALUES(grad(x), 40, 40);
}

TEST(Engine, BackwardAccumulatesIntoLeaves) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = sum(mul(x, x));
  EXPECT_FALSE(is_leaf(y));
  EXPECT_EQ(grad_fn(y)->name(), "SumBackward");
  backward(y);
  EXPECT_VALUES(grad(x), 2, 4, 6);
  backward(sum(mul(x, 3.0)));  // a second graph accumulates
  EXPECT_VALUES(grad(x), 5, 7, 9);
}

TEST(Engine, SharedSubexpressionsRunOnceWithSummedGradients) {
  Tensor x = leaf({2});
  Tensor h = exp(x);                  // used twice below
  Tensor y = add(mul(h, h), h);       // e^2x + e^x
  backward(sum(y));
  double e2 = std::exp(2.0);
  EXPECT_NEAR(grad(x).item<double>(), 2 * e2 * e2 + e2, 1e-3);
}

TEST(Engine, ClearErrors) {
  Tensor x = leaf({1, 2});
  expect_error<ValueError>([&] { backward(mul(x, 2.0)); }, {"implicitly", "scalar", "[2]"});
  expect_error<ValueError>([&] { backward(ones({1})); }, {"does not require grad"});
  expect_error<ValueError>([&] { backward(sum(x), ones({3})); }, {"shape [3]"});
  Tensor y = sum(mul(x, x));
  backward(y);
  expect_error<Error>([&] { backward(y); }, {"MulBackward", "second time", "retain_graph"});
  Tensor z = sum(mul(x, x));
  backward(z, Tensor(), /*retain_graph=*/true);
  backward(z);  // retained: works once more
  Tensor out = empty({2});
  expect_error<NotImplementedError>([&] { mul_out(out, x, x); }, {"MulBackward", "out="});
  Tensor i = tensor<int64_t>({1, 2}, {2});
  expect_error<Error>([&] { set_requires_grad(i); }, {"floating point"});
}

TEST(Engine, InPlaceChangeOfASavedTensorIsCaught) {
  Tensor x = leaf({1, 2}), w = leaf({3, 4});
  Tensor y = sum(mul(x, w));  // MulBackward saves x and w
  {
    NoGradGuard no_grad;      // how an optimizer updates parameters
    add_(w, ones({2}));
  }
  expect_error<Error>([&] { backward(y); }, {"MulBackward", "modified in place", "version"});
}

TEST(Engine, HooksRunInOrderAndCanReplaceGradients) {
  Tensor x = leaf({1, 2}), w = leaf({3, 4});
  std::vector<std::string> order;
  Tensor h = mul(x, w);
  register_hook(h, [&](const Tensor& g) {
    order.push_back("tensor hook on h");
    return mul(g, 2.0);  // doubles every gradient below h
  });
  register_hook(x, [&](const Tensor&) {
    order.push_back("tensor hook on leaf x");
    return Tensor();
  });
  register_post_accumulate_grad_hook(x, [&](const Tensor& t) {
    order.push_back("post-accumulate x");
    EXPECT_TRUE(grad(t).defined());
  });
  register_post_accumulate_grad_hook(w, [&](const Tensor&) {
    order.push_back("post-accumulate w");
    autograd::queue_callback([&] {
      order.push_back("callback");
      EXPECT_TRUE(grad(x).defined() && grad(w).defined());  // after every gradient
    });
  });
  grad_fn(h)->register_prehook([&](const TensorList& g) {
    order.push_back("node pre-hook");
    return TensorList();
  });
  grad_fn(h)->register_hook([&](const TensorList&, const TensorList&) { order.push_back("node post-hook"); });
  backward(sum(h));
  EXPECT_VALUES(grad(x), 6, 8);  // 2 * w
  EXPECT_VALUES(grad(w), 2, 4);  // 2 * x
  ASSERT_EQ(order.size(), 7u);
  EXPECT_EQ(order[0], "tensor hook on h");
  EXPECT_EQ(order[1], "node pre-hook");
  EXPECT_EQ(order[2], "node post-hook");
  EXPECT_EQ(order.back(), "callback");
  auto pos = [&](const std::string& s) { return std::find(order.begin(), order.end(), s) - order.begin(); };
  EXPECT_LT(pos("tensor hook on leaf x"), pos("post-accumulate x"));
  expect_error<ValueError>([] { autograd::queue_callback([] {}); }, {"only callable during a backward"});
}

TEST(Engine, GradReturnsGradientsWithoutTouchingDotGrad) {
  Tensor x = leaf({1, 2}), y = leaf({3, 4}), unused = leaf({0});
  Tensor z = sum(mul(x, y));
  TensorList g = autograd::grad({z}, {x, y}, {}, /*retain_graph=*/true);
  EXPECT_VALUES(g[0], 3, 4);
  EXPECT_VALUES(g[1], 1, 2);
  EXPECT_FALSE(grad(x).defined());
  expect_error<ValueError>([&] { autograd::grad({z}, {unused}, {}, true); }, {"not used", "allow_unused"});
  TensorList u = autograd::grad({z}, {x, unused}, {}, false, false, /*allow_unused=*/true);
  EXPECT_TRUE(u[0].defined());
  EXPECT_FALSE(u[1].defined());
}

TEST(Engine, DoubleBackwardThroughCreateGraph) {
  Tensor x = leaf({1, 2});
  Tensor y = sum(pow(x, 3));
  Tensor dx = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true)[0];  // 3x^2
  EXPECT_VALUES(dx, 3, 12);
  EXPECT_TRUE(requires_grad(dx));
  backward(sum(dx));  // d/dx sum(3x^2) = 6x
  EXPECT_VALUES(grad(x), 6, 12);
}

TEST(Engine, RetainGradDetachAndGradModes) {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 3.0);
  retain_grad(h);
  Tensor d = detach(h);
  EXPECT_FALSE(requires_grad(d));
  backward(sum(mul(h, h)));
  EXPECT_VALUES(grad(h), 6, 12);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(requires_grad(mul(x, 2.0)));
    EnableGradGuard enable;
    EXPECT_TRUE(requires_grad(mul(x, 2.0)));
  }
  Tensor made_inside, view_inside;
  {
    InferenceMode inference;
    EXPECT_TRUE(InferenceMode::is_enabled());
    EXPECT_FALSE(requires_grad(mul(x, 2.0)));
    made_inside = mul(x, 2.0);
    view_inside = x.view({-1});
    InferenceMode off(false);
    EXPECT_FALSE(InferenceMode::is_enabled());
    EXPECT_FALSE(mul(x, 2.0).impl()->storage()->is_inference());
  }
  // Memory allocated in inference mode makes inference tensors (and their views); a view of a normal tensor
  // made inside stays normal.
  EXPECT_FALSE(InferenceMode::is_enabled());
  EXPECT_TRUE(made_inside.impl()->storage()->is_inference());
  EXPECT_TRUE(made_inside.view({-1}).impl()->storage()->is_inference());
  EXPECT_FALSE(view_inside.impl()->storage()->is_inference());
  EXPECT_FALSE(mul(x, 2.0).impl()->storage()->is_inference());
  EXPECT_TRUE(requires_grad(mul(x, 2.0)));
  // Integer results of graph tensors simply do not require grad.
  EXPECT_FALSE(requires_grad(argmax(x)));
  EXPECT_FALSE(requires_grad(gt(x, 1.0)));
}

TEST(Engine, CrossEntropyGradientMatchesTheClosedForm) {
  manual_seed(7);
  Tensor logits = randn({4, 5});
  set_requires_grad(logits);
  Tensor target = tensor<int64_t>({0, 3, 4, 1}, {4});
  backward(cross_entropy(logits, target));
  // d(mean CE)/d logits = (softmax - onehot) / N
  Tensor expected = div(sub(softmax(detach(logits), 1), one_hot(target, 5).to(DType::Float32)), 4.0);
  EXPECT_TRUE(allclose(grad(logits), expected, 1e-4, 1e-6));
}


TEST(Checkpoint, RecomputesInBackwardWithTheSameGradientsAndRandomness) {
  manual_seed(3);
  Tensor w1 = randn({6, 8}), w2 = randn({8, 3}), x = randn({4, 6});
  set_requires_grad(w1);
  set_requires_grad(w2);
  set_requires_grad(x);
  int calls = 0;
  // Dropout inside: the recomputation must draw the same mask.
  CheckpointFunction fn = [&](const TensorList& in) {
    ++calls;
    Tensor h = relu(mm(in[0], in[1]));
    Tensor mask = dropout_mask(h.sizes(), 0.5).to(h.dtype());
    return TensorList{mm(mul(h, mask), in[2])};
  };
  manual_seed(10);
  Tensor plain = fn({x, w1, w2})[0];
  backward(sum(mul(plain, plain)));
  Tensor g1 = clone(grad(w1)), g2 = clone(grad(w2)), gx = clone(grad(x));
  set_grad(w1, Tensor());
  set_grad(w2, Tensor());
  set_grad(x, Tensor());
  manual_seed(10);
  calls = 0;
  Tensor ck = checkpoint(fn, {x, w1, w2})[0];
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(grad_fn(ck)->name(), "CheckpointBackward");
  EXPECT_TRUE(allclose(ck, plain));
  randn({100});  // the generator moves on before backward
  backward(sum(mul(ck, ck)));
  EXPECT_EQ(calls, 2);  // recomputed once
  EXPECT_TRUE(allclose(grad(w1), g1, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(grad(w2), g2, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(grad(x), gx, 1e-5, 1e-6));
  // Without inputs that need grad it is just a call.
  Tensor plain_in = randn({2, 6});
  EXPECT_FALSE(requires_grad(checkpoint([](const TensorList& in) { return TensorList{mul(in[0], 2.0)}; }, {plain_in})[0]));
}

}  // namespace
}  // namespace trainrun
