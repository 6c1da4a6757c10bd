// A backward split in two for zero-bubble pipelines (backward_inputs, then
// DeferredWeightGrads::run), and the pruning under it: autograd::grad runs
// only the nodes on a path to its inputs, and asks each for only the
// gradients on such a path (needs_input_grad).
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "tensor/ops.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

Tensor leaf(const IntList& shape, uint64_t seed) {
  manual_seed(seed);
  Tensor t = randn(shape);
  return set_requires_grad(t);
}

// A small network with what a pipeline stage's graph holds: an input used twice, a weight used twice (tied), a
// bias broadcast, a nonlinearity, and a weight reached only through a view.
struct Net {
  Tensor w1 = leaf({6, 8}, 1), b1 = leaf({8}, 2), w2 = leaf({5, 8}, 3);
  TensorList params() const { return {w1, b1, w2}; }
  Tensor forward(const Tensor& x) const {
    Tensor h = relu(add(matmul(x, w1), b1));
    Tensor y = matmul(h, t(w2));                             // w2 through a transpose (Linear's layout)
    return add(y, matmul(mul(x, 0.5), w1).narrow(1, 0, 5));  // x and w1 again
  }
};

TEST(SplitBackward, InputsThenWeightsEqualsOneBackward) {
  Net net;
  Tensor x = leaf({4, 6}, 4), g = randn({4, 5});
  backward(net.forward(x), g);
  TensorList expected;
  for (const Tensor& p : net.params()) expected.push_back(clone(grad(p)));
  Tensor expected_x = clone(grad(x));
  zero_grad(net.params());
  zero_grad({x});

  int accumulated = 0;
  for (const Tensor& p : net.params())
    register_post_accumulate_grad_hook(p, [&accumulated](const Tensor&) { ++accumulated; });
  auto [inputs, weights] = autograd::backward_inputs({net.forward(x)}, {x}, {g});
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(values(inputs[0]), values(expected_x));
  EXPECT_FALSE(grad(x).defined());  // the input's gradient is returned, not accumulated
  for (const Tensor& p : net.params()) EXPECT_FALSE(grad(p).defined()) << "a weight gradient before the weight pass";
  EXPECT_EQ(accumulated, 0);
  EXPECT_FALSE(weights->done());
  weights->run();
  EXPECT_TRUE(weights->done());
  EXPECT_EQ(accumulated, 3);  // each weight's hooks once, in the weight pass
  for (size_t i = 0; i < expected.size(); ++i) expect_close(grad(net.params()[i]), values(expected[i]), 1e-6);
  expect_error<ValueError>([&] { weights->run(); }, {"already computed"});
}

// The first stage: its input is data (no gradient), so the input pass has nothing to do and the weight pass
// does all of backward.
TEST(SplitBackward, NoInputThatNeedsAGradient) {
  Net net;
  Tensor x = randn({4, 6}), g = randn({4, 5});
  backward(net.forward(x), g);
  TensorList expected;
  for (const Tensor& p : net.params()) expected.push_back(clone(grad(p)));
  zero_grad(net.params());
  auto [inputs, weights] = autograd::backward_inputs({net.forward(x)}, {}, {g});
  EXPECT_TRUE(inputs.empty());
  for (const Tensor& p : net.params()) EXPECT_FALSE(grad(p).defined());
  weights->run();
  for (size_t i = 0; i < expected.size(); ++i) expect_close(grad(net.params()[i]), values(expected[i]), 1e-6);
}

// A node that records, each time it runs, which input gradients the pass asked of it.
class Probe : public Node {
 public:
  explicit Probe(std::vector<Edge> edges, std::vector<std::vector<bool>>* asked)
      : Node(std::move(edges)), asked_(asked) {}
  TensorList apply(TensorList&& grads) override {
    std::vector<bool> now;
    TensorList out;
    for (size_t i = 0; i < next_edges().size(); ++i) {
      now.push_back(autograd::needs_input_grad(i));
      out.push_back(now.back() ? grads[0] : Tensor());
    }
    asked_->push_back(now);
    return out;
  }
  std::string name() const override { return "Probe"; }

 private:
  std::vector<std::vector<bool>>* asked_;
};

TEST(SplitBackward, EachPassAsksOnlyForTheGradientsItNeeds) {
  Tensor a = leaf({3}, 5), w = leaf({3}, 6), unrelated = leaf({3}, 7);
  std::vector<std::vector<bool>> asked;
  // y = probe(a, w): a node with an edge to the input a and one to the weight w.
  Tensor y = ones({3});
  auto probe = std::make_shared<Probe>(std::vector<Edge>{gradient_edge(a), gradient_edge(w)}, &asked);
  set_history(y, probe);
  Tensor out = add(y, mul(unrelated, 2.0));  // a branch only the weight pass needs
  auto [inputs, weights] = autograd::backward_inputs({out}, {a}, {ones({3})});
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (std::vector<bool>{true, false}));
  EXPECT_FALSE(grad(unrelated).defined());
  weights->run();
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[1], (std::vector<bool>{false, true}));
  EXPECT_VALUES(grad(w), 1, 1, 1);
  EXPECT_VALUES(grad(unrelated), 2, 2, 2);
  EXPECT_FALSE(grad(a).defined());

  // grad() toward one input: the probe is asked for that edge only, and a node off every path never runs.
  asked.clear();
  Tensor y2 = ones({3});
  set_history(y2, std::make_shared<Probe>(std::vector<Edge>{gradient_edge(a), gradient_edge(w)}, &asked));
  Tensor z = leaf({3}, 8);
  std::vector<std::vector<bool>> off_path;
  Tensor side = ones({3});
  set_history(side, std::make_shared<Probe>(std::vector<Edge>{gradient_edge(z)}, &off_path));
  TensorList gw = autograd::grad({add(y2, side)}, {w}, {ones({3})});
  EXPECT_VALUES(gw[0], 1, 1, 1);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (std::vector<bool>{false, true}));
  EXPECT_TRUE(off_path.empty()) << "grad() ran a node no input depends on";
}

}  // namespace
}  // namespace trainrun
