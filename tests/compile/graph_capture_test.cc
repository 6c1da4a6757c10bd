// compile/: a capture records the ops of a call (once each, below autograd),
// its factories as allocations and its random draws as draws; a replay on new
// inputs gives what the eager call gives, with autograd's graph; what cannot
// be replayed breaks the capture with a reason.
#include "compile/graph_capture.h"

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "tensor/factories.h"
#include "tensor/generator.h"
#include "tensor/graph_break.h"
#include "tensor/elementwise.h"
#include "tensor/ops.h"
#include "tests/tensor/test_util.h"

namespace trainrun::compile {
namespace {

// Bitwise equality of two float tensors (a replay runs the same kernels).
bool equal(const Tensor& a, const Tensor& b) { return allclose(a, b, 0.0, 0.0); }

// The program under test: y = (x * w + 1).tanh(), with w made before the call (a constant).
Tensor program(const Tensor& x, const Tensor& w) { return tanh(add(mul(x, w), 1)); }

TEST(GraphCapture, ReplaysTheRecordedOpsOnNewInputs) {
  Tensor w = ft({0.5f, -2.0f});
  CapturedGraph graph;
  Tensor x = ft({1.0f, 2.0f});
  {
    GraphCapture capture(graph, {x});
    Tensor y = program(x, w);
    capture.finish({y});
    EXPECT_FALSE(capture.broken()) << capture.break_reason();
  }
  // mul, add and tanh, and the 0-d tensor of the scalar 1 (an allocation and its fill_: made anew per run).
  EXPECT_EQ(graph.num_nodes(), 5u) << graph.to_string();
  EXPECT_EQ(graph.num_constants(), 1u);  // w, by reference
  Tensor other = ft({3.0f, -1.0f});
  std::vector<Tensor> out = graph.run({other});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(equal(out[0], program(other, w)));
  mul_(w, 2);  // read when run, not copied
  EXPECT_TRUE(equal(graph.run({other})[0], program(other, w)));
}

TEST(GraphCapture, AReplayRecordsAutogradsGraphAsTheEagerCallDoes) {
  Tensor w = ft({0.5f, -2.0f});
  set_requires_grad(w, true);
  CapturedGraph graph;
  Tensor x = ft({1.0f, 2.0f});
  {
    GraphCapture capture(graph, {x});
    capture.finish({program(x, w)});
  }
  backward(sum(graph.run({x})[0]), Tensor());
  Tensor replayed = grad(w);
  set_grad(w, Tensor());
  backward(sum(program(x, w)), Tensor());
  EXPECT_TRUE(equal(replayed, grad(w)));
}

TEST(GraphCapture, FactoriesAreAllocatedAnewAndDrawsDrawAnew) {
  CapturedGraph graph;
  Tensor x = ft({1.0f, 2.0f, 3.0f, 4.0f});
  {
    GraphCapture capture(graph, {x});
    Tensor noise = rand({4});
    capture.finish({add(x, noise)});
    EXPECT_FALSE(capture.broken()) << capture.break_reason();
  }
  Tensor a = graph.run({x})[0], b = graph.run({x})[0];
  EXPECT_FALSE(a.is_same(b));
  EXPECT_FALSE(equal(a, b)) << "a replay repeated the recorded random numbers";
  default_generator().manual_seed(7);
  Tensor replayed = graph.run({x})[0];
  default_generator().manual_seed(7);
  EXPECT_TRUE(equal(replayed, add(x, rand({4}))));
}

TEST(GraphCapture, BreaksSayWhy) {
  CapturedGraph graph;
  Tensor x = ft({1.0f});
  {
    GraphCapture capture(graph, {x});
    note_graph_break("a collective ran");  // what c10d and nn tell a capture
    EXPECT_TRUE(capture.broken());
    EXPECT_EQ(capture.break_reason(), "a collective ran");
  }
  note_graph_break("after the capture: nobody listens");  // no capture on this thread: nothing happens
  Tensor w = ft({2.0f});
  set_requires_grad(w, true);
  CapturedGraph g2;
  {
    GraphCapture capture(g2, {x});
    Tensor loss = sum(mul(x, w));
    backward(loss, Tensor());
    EXPECT_TRUE(capture.broken());
    EXPECT_NE(capture.break_reason().find("ran a backward pass"), std::string::npos) << capture.break_reason();
  }
}

}  // namespace
}  // namespace trainrun::compile
