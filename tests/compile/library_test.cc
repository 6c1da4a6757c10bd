// autograd/library.h: a C++ custom op registered with TRAINRUN_LIBRARY runs
// and trains like a built-in op, and in a recorded call it is one node of
// the graph whose backward formula is part of the recorded backward.
#include "autograd/library.h"

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "compile/graph_capture.h"
#include "compile/joint_graph.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/reductions.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

TRAINRUN_LIBRARY(trlibtest, m) {
  trainrun::CustomOpDefinition cube;
  cube.cpu = [](const trainrun::TensorList& in) { return trainrun::mul(trainrun::mul(in[0], in[0]), in[0]); };
  cube.backward = [](const trainrun::Tensor& g, const trainrun::TensorList& in, const trainrun::Tensor&) {
    return trainrun::TensorList{trainrun::mul(trainrun::mul(g, trainrun::mul(in[0], in[0])), 3)};
  };
  m.def("cube", cube);
}

namespace trainrun::compile {
namespace {

TEST(Library, AnOpRegisteredAtStartupComputesAndTrains) {
  CustomOp cube("trlibtest::cube");
  Tensor x = ft({1.0f, -2.0f, 3.0f});
  set_requires_grad(x, true);
  Tensor y = cube({x});
  EXPECT_TRUE(allclose(y, ft({1.0f, -8.0f, 27.0f}), 0.0, 0.0));
  backward(sum(y), Tensor());
  EXPECT_TRUE(allclose(grad(x), ft({3.0f, 12.0f, 27.0f}), 0.0, 0.0));
  Library again("trlibtest");
  CustomOpDefinition def;
  def.cpu = [](const TensorList& in) { return in[0]; };
  expect_error<ValueError>([&] { again.def("cube", def); }, {"trlibtest::cube"});
}

TEST(Library, InARecordedCallTheOpIsOneNodeAndItsFormulaIsRecorded) {
  CustomOp cube("trlibtest::cube");
  Tensor w = ft({0.5f, 2.0f, -1.0f});
  set_requires_grad(w, true);
  auto program = [&](const Tensor& x) { return sum(cube({mul(x, w)})); };
  auto graph = std::make_shared<CapturedGraph>();
  std::shared_ptr<JointGraph> joint;
  Tensor x = ft({1.0f, 2.0f, 3.0f});
  {
    GraphCapture capture(*graph, {x});
    Tensor y = program(x);
    capture.finish({y});
    ASSERT_FALSE(capture.broken()) << capture.break_reason();
    std::string why;
    joint = JointGraph::record(graph, capture, {x}, {y}, &why);
    ASSERT_NE(joint, nullptr) << why;
  }
  int custom = 0;
  for (const auto& node : graph->nodes()) custom += node.op != nullptr && node.op->name() == "trlibtest::cube";
  EXPECT_EQ(custom, 1) << graph->to_string();
  Tensor other = ft({-1.0f, 0.5f, 2.0f});
  Tensor y = joint->run({other})[0];
  EXPECT_TRUE(allclose(y, program(other), 1e-6, 1e-6));
  backward(y, Tensor());
  Tensor replayed = grad(w);
  set_grad(w, Tensor());
  backward(program(other), Tensor());
  EXPECT_TRUE(allclose(replayed, grad(w), 1e-6, 1e-6));
}

}  // namespace
}  // namespace trainrun::compile
