// compile/aot_package.h, aot_model.h, program_io.h: a no_grad program (with
// a fused loop, a matmul, numbers and a frozen weight) written as a package
// and run by aot::Model gives what the eager code gives; the JSON program
// reads back to the same graph; wrong inputs and broken packages are refused
// by name.
#include "compile/aot_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "autograd/grad_mode.h"
#include "compile/aot_package.h"
#include "compile/fusion.h"
#include "compile/graph_capture.h"
#include "compile/program_io.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/linalg.h"
#include "tensor/ops.h"
#include "tensor/reductions.h"
#include "tests/compile/temp_kernel_cache.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

namespace trainrun::compile {
namespace {

using AotPackage = TempKernelCache;

// gelu(x @ w + b) * 0.5 - 1, summed over rows too: a matmul, a fused loop (add by column, gelu, mul, sub), a sum.
std::vector<Tensor> model(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor h = sub(mul(gelu(add(mm(x, w), b)), 0.5), 1);
  return {h, sum(h, {0})};
}

struct Recorded {
  std::shared_ptr<const CapturedGraph> graph;
  std::string source;
};

Recorded record(const Tensor& x, const Tensor& w, const Tensor& b) {
  NoGradGuard no_grad;
  auto graph = std::make_shared<CapturedGraph>();
  {
    GraphCapture capture(*graph, {x});
    capture.finish(model(x, w, b));
  }
  FusionResult fused = fuse_pointwise(graph, {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  return {fused.graph, fused.source};
}

TEST_F(AotPackage, APackageRunsAsTheEagerCode) {
  Tensor w = randn({6, 9}), b = randn({9});
  Recorded r = record(randn({4, 6}), w, b);
  write_aot_package(dir_ / "pkg", *r.graph, r.source, {"x"}, {"w", "b"});
  EXPECT_TRUE(std::filesystem::exists(dir_ / "pkg" / "model.so"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "pkg" / "weights.safetensors"));
  aot::Model m((dir_ / "pkg").string());
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ(m.inputs()[0].sizes, IntList({4, 6}));
  EXPECT_EQ(m.num_outputs(), 2u);
  Tensor x = randn({4, 6});
  std::vector<Tensor> got = m.run({x});
  std::vector<Tensor> expected = model(x, w, b);
  EXPECT_TRUE(allclose(got[0], expected[0], 1e-5, 1e-6));
  EXPECT_TRUE(allclose(got[1], expected[1], 1e-5, 1e-6));
  // The weights were written when packaged: changing w afterwards changes nothing.
  mul_(w, 2);
  EXPECT_TRUE(allclose(m.run({x})[0], expected[0], 1e-5, 1e-6));
}

TEST_F(AotPackage, WrongInputsAreRefusedByName) {
  Recorded r = record(randn({4, 6}), randn({6, 9}), randn({9}));
  write_aot_package(dir_ / "pkg", *r.graph, r.source, {"tokens"}, {"w", "b"});
  aot::Model m((dir_ / "pkg").string());
  expect_error<ValueError>([&] { m.run({randn({5, 6})}); },
                           {"input 'tokens' has shape [5, 6]; the model was compiled for [4, 6]"});
  expect_error<ValueError>([&] { m.run({zeros({4, 6}, TensorOptions(DType::Float64))}); },
                           {"input 'tokens' is float64; the model was compiled for float32"});
  expect_error<ValueError>([&] { m.run({}); }, {"0 inputs given, the model takes 1"});
}

TEST_F(AotPackage, BrokenPackagesAreRefusedByName) {
  expect_error<ValueError>([&] { aot::Model m((dir_ / "none").string()); },
                           {"not a package (it needs model.so and weights.safetensors)"});
  Recorded r = record(randn({4, 6}), randn({6, 9}), randn({9}));
  write_aot_package(dir_ / "pkg", *r.graph, r.source, {"x"}, {"w", "b"});
  std::ofstream(dir_ / "pkg" / "weights.safetensors", std::ios::trunc) << "not safetensors";
  expect_error<ValueError>([&] { aot::Model m((dir_ / "pkg").string()); }, {"weights.safetensors"});
  expect_error<ValueError>([&] { write_aot_package(dir_ / "p2", *r.graph, r.source, {"x"}, {"w"}); },
                           {"1 constant names for 2 constants"});
}

TEST_F(AotPackage, TheProgramReadsBackToTheSameGraph) {
  Tensor w = randn({6, 9}), b = randn({9});
  Recorded r = record(randn({4, 6}), w, b);
  const nlohmann::json program = program_to_json(*r.graph, {"x"}, {"w", "b"});
  // Read back without fused loops: a program whose loop is missing names it.
  expect_error<ValueError>(
      [&] { program_from_json(program, {{"w", w}, {"b", b}}, [](const std::string&) { return nullptr; }, nullptr); },
      {"no fused loop 'fused_0'"});
  expect_error<ValueError>(
      [&] { program_from_json(program, {{"w", w}}, [](const std::string&) { return nullptr; }, nullptr); },
      {"the weights have no tensor 'b'"});
  nlohmann::json unknown = program;
  for (auto& node : unknown["nodes"])
    if (node.contains("op") && node["op"] == "mm") node["op"] = "no_such_op";
  expect_error<ValueError>(
      [&] { program_from_json(unknown, {{"w", w}, {"b", b}}, [](const std::string&) { return nullptr; }, nullptr); },
      {"it calls op 'no_such_op', which this build of trainrun does not have"});
  // The same text again from a graph read back (the loop resolved from the graph it came from).
  const FusedKernel* kernel = nullptr;
  for (const auto& n : r.graph->nodes())
    if (n.fused) kernel = n.fused.get();
  ASSERT_NE(kernel, nullptr);
  LoadedProgram back = program_from_json(program, {{"w", w}, {"b", b}},
                                         [&](const std::string&) { return kernel->fn; }, kernel->library);
  EXPECT_EQ(program_to_json(*back.graph, {"x"}, {"w", "b"}).dump(), program.dump());
  Tensor x = randn({4, 6});
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(back.graph->run({x})[0], model(x, w, b)[0], 1e-5, 1e-6));
}

}  // namespace
}  // namespace trainrun::compile
