// compile/dynamic_shapes.h: a program recorded at a lattice of sizes of its
// dynamic dim (a matmul, a fused loop, a mean down the rows: its scale read
// at run time) is generalized; at sizes never recorded it gives what the
// eager code gives, from memory and from an AOT package; inputs out of range
// or disagreeing are refused by name, and recordings that differ in their
// ops, or in an integer that is no polynomial of the dims, are refused
// naming the op.
#include "compile/dynamic_shapes.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "autograd/grad_mode.h"
#include "compile/aot_model.h"
#include "compile/aot_package.h"
#include "compile/fusion.h"
#include "compile/graph_capture.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/linalg.h"
#include "tensor/reductions.h"
#include "tensor/views.h"
#include "tests/compile/temp_kernel_cache.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

namespace trainrun::compile {
namespace {

using DynamicShapes = TempKernelCache;

using Model = std::function<std::vector<Tensor>(const Tensor&)>;

struct Recorded {
  std::shared_ptr<const CapturedGraph> graph;
  std::string source;
};

Recorded record(const Model& model, const Tensor& x) {
  NoGradGuard no_grad;
  auto graph = std::make_shared<CapturedGraph>();
  {
    GraphCapture capture(*graph, {x});
    capture.finish(model(x));
  }
  FusionResult fused = fuse_pointwise(graph, {});
  return {fused.graph, fused.source};
}

// rows of x vary: the lattice 2..5 (degree 3), then 6 and 9 to check.
std::shared_ptr<DynamicProgram> generalize(const Model& model, int64_t cols, std::vector<int64_t> rows,
                                           std::string* source = nullptr) {
  std::vector<std::shared_ptr<const CapturedGraph>> graphs;
  std::vector<std::vector<int64_t>> points;
  for (int64_t r : rows) {
    Recorded rec = record(model, randn({r, cols}));
    if (source != nullptr) *source = rec.source;
    graphs.push_back(rec.graph);
    points.push_back({r});
  }
  return DynamicProgram::generalize({{"rows", 1, 1000}}, {{InputDim{0, 1, 0}, InputDim{}}}, graphs, points, 3,
                                    graphs.size() - 1);
}

TEST_F(DynamicShapes, AProgramGeneralizedFromALatticeRunsAtSizesNeverRecorded) {
  Tensor w = randn({6, 9}), b = randn({9});
  // gelu(x @ w + b) * 0.5 - 1, and its mean down the rows: a matmul, one loop whose column mean divides by rows.
  Model model = [&](const Tensor& x) {
    Tensor h = sub(mul(gelu(add(mm(x, w), b)), 0.5), 1);
    return std::vector<Tensor>{h, mean(h, {0})};
  };
  std::string source;
  auto program = generalize(model, 6, {2, 3, 4, 5, 6, 9}, &source);
  EXPECT_GT(program->num_size_dependent(), 0u);
  for (int64_t rows : {1, 7, 130}) {
    Tensor x = randn({rows, 6});
    const std::vector<int64_t> values = program->bind({x}, {"x"});
    ASSERT_EQ(values, std::vector<int64_t>({rows}));
    std::vector<Tensor> got;
    {
      NoGradGuard no_grad;
      got = program->at(values)->run({x});
    }
    std::vector<Tensor> expected = model(x);
    EXPECT_TRUE(allclose(got[0], expected[0], 1e-5, 1e-6)) << rows;
    EXPECT_TRUE(allclose(got[1], expected[1], 1e-5, 1e-6)) << rows;
  }
  EXPECT_EQ(program->at({7}), program->at({7}));  // (made once per size)

  // From a package, with no recording: the polynomials travel in its program.
  write_aot_package(dir_ / "pkg", *program->base(), source, {"x"}, {"w", "b"}, program.get());
  aot::Model m((dir_ / "pkg").string());
  ASSERT_NE(m.dynamic(), nullptr);
  Tensor x = randn({11, 6});
  std::vector<Tensor> got = m.run({x});
  EXPECT_TRUE(allclose(got[1], model(x)[1], 1e-5, 1e-6));
  expect_error<ValueError>([&] { m.run({randn({1001, 6})}); },
                           {"input 'x' has size 1001 at dim 0 (rows): rows = 1001 is outside its range [1, 1000]"});
  expect_error<ValueError>([&] { m.run({randn({4, 7})}); },
                           {"input 'x' has size 7 at dim 1; the program was exported for 6 there (a static dim)"});
}

TEST_F(DynamicShapes, RecordingsThatDifferInTheirOpsAreRefusedNamingTheOp) {
  Model branching = [](const Tensor& x) {
    return std::vector<Tensor>{x.size(0) > 4 ? mul(x, 2) : add(x, 1)};
  };
  expect_error<ValueError>([&] { generalize(branching, 3, {2, 3, 4, 5, 6, 9}); },
                           {"differs at op", "at rows=2 and at rows=5", "add", "mul"});
}

TEST_F(DynamicShapes, AnIntegerThatIsNoPolynomialOfTheDimsIsRefused) {
  Model halving = [](const Tensor& x) {  // (rows / 2 rounds down: no polynomial)
    return std::vector<Tensor>{mul(reshape(narrow(x, 0, 0, x.size(0) / 2 * 2), {x.size(0) / 2, -1}), 2)};
  };
  expect_error<ValueError>([&] { generalize(halving, 4, {2, 3, 4, 5, 6, 9}); },
                           {"no polynomial of the dynamic dims", "at rows=2"});
}

TEST_F(DynamicShapes, WrongInputsAreRefusedByName) {
  Model model = [](const Tensor& x) { return std::vector<Tensor>{mul(x, 3)}; };
  auto program = generalize(model, 2, {2, 3, 4, 5, 6, 9});
  expect_error<ValueError>([&] { program->bind({randn({3, 2, 1})}, {"x"}); },
                           {"input 'x' has 3 dims; the program was exported for 2"});
  expect_error<ValueError>([&] { program->bind({}, {}); }, {"0 inputs given, the program takes 1"});
}

}  // namespace
}  // namespace trainrun::compile
