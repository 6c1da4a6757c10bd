// compile/fusion.h and joint_graph.h: runs of pointwise ops become one
// generated loop that computes what the ops compute (odd sizes, so the
// masked tail runs; a bias by column; numbers as scalars; comparisons as
// masks inside the loop), writes only what is read later, is compiled once
// and then found in the cache; a failing compiler is an error that says so.
// A joint graph's backward gives eager's gradients from one node.
#include "compile/fusion.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "compile/dead_code.h"
#include "compile/fused_kernel.h"
#include "compile/gemm_epilogue.h"
#include "compile/graph_capture.h"
#include "compile/joint_graph.h"
#include "compile/kernel_library.h"
#include "compile/recompute.h"
#include "compile/scatter_sum.h"
#include "compile/pointwise_codegen.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/linalg.h"
#include "tensor/nn_functional.h"
#include "tensor/ops.h"
#include "tensor/reductions.h"
#include "tensor/views.h"
#include "tests/compile/record_graph.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

namespace trainrun::compile {
namespace {

// Each test compiles into a folder of its own, so "compiled now" and "found in the cache" are its own.
class Fusion : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = std::filesystem::path(::testing::TempDir()) / ("kernels-" + std::to_string(getpid()) + "-" + test);
    std::filesystem::remove_all(dir_);
    setenv("TRAINRUN_KERNEL_CACHE", dir_.c_str(), 1);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    unsetenv("TRAINRUN_KERNEL_CACHE");
    unsetenv("CXX");
  }
  std::filesystem::path dir_;
};

int count_fused(const CapturedGraph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.fused != nullptr;
  return n;
}

// tanh(x * bias + 1) * gelu(x) - exp(-x) / 3, over [5, 37]: 37 columns, so every row ends in a masked tail.
std::vector<Tensor> chain(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];
  const Tensor& bias = in[1];
  return {sub(mul(tanh(add(mul(x, bias), 1)), gelu(x)), div(exp(neg(x)), 3))};
}

TEST_F(Fusion, AChainBecomesOneLoopThatComputesWhatTheOpsDo) {
  Tensor x = randn({5, 37});
  Tensor bias = randn({37});
  auto graph = record({x, bias}, chain);
  FusionResult fused = fuse_pointwise(graph, {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  EXPECT_GE(fused.ops_fused, 8);
  EXPECT_EQ(count_fused(*fused.graph), 1);
  Tensor other = randn({5, 37});
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(fused.graph->run({other, bias})[0], chain({other, bias})[0], 1e-6, 1e-6));
  // The loop's inputs: x in full, the bias by column (the numbers 1 and 3 are scalars).
  for (const auto& node : fused.graph->nodes())
    if (node.fused) {
      EXPECT_EQ(node.fused->cols, 37);
      EXPECT_EQ(node.fused->rows, 5);
    }
}

TEST_F(Fusion, WholeNumberConstantsAreFloatLiterals) {
  // add's alpha 2 and addcmul's value 3 were written "2f" and "3f", which no compiler takes: the graph replayed
  // unfused. A constant with no literal (inf) leaves its op out of the loop instead.
  auto program = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(addcmul(add(in[0], in[1], 2), in[0], in[1], 3), 0.5)};
  };
  Tensor x = randn({4, 9}), y = randn({4, 9});
  FusionResult fused = fuse_pointwise(record({x, y}, program), {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  EXPECT_EQ(fused.ops_fused, 3);
  EXPECT_EQ(float_literal(2), "2.0f");
  EXPECT_EQ(float_literal(1e-5), "1e-05f");
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(fused.graph->run({x, y})[0], program({x, y})[0], 1e-6, 1e-6));
  auto with_inf = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{exp(add(tanh(in[0]), in[1], std::numeric_limits<double>::infinity()))};
  };
  FusionResult inf_fused = fuse_pointwise(record({x, y}, with_inf), {});
  EXPECT_EQ(inf_fused.loops, 0) << inf_fused.graph->to_string();
}

TEST_F(Fusion, ASumAskedForInFloat32JoinsTheLoop) {
  // sum(..., dtype=float32) of float32 is the plain sum (the dtype argument was compared by a wrong type name).
  auto program = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(mul(exp(in[0]), 2), {1}, true, DType::Float32)};
  };
  Tensor x = randn({4, 9});
  FusionResult fused = fuse_pointwise(record({x}, program), {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  EXPECT_EQ(fused.ops_fused, 3);
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(fused.graph->run({x})[0], program({x})[0], 1e-6, 1e-6));
}

TEST_F(Fusion, WritesOutOnlyWhatIsReadLaterOrKept) {
  Tensor x = randn({3, 7});
  auto graph = record({x}, [](const std::vector<Tensor>& in) {
    Tensor a = exp(add(in[0], 1));  // read by the sum after the loop
    Tensor b = mul(a, 2);
    Tensor c = sigmoid(b);           // an intermediate nothing else reads
    Tensor d = mul(c, in[0]);
    return std::vector<Tensor>{d, sum(a)};
  });
  FusionResult fused = fuse_pointwise(graph, {});
  ASSERT_EQ(fused.loops, 1) << fused.graph->to_string();
  for (const auto& node : fused.graph->nodes())
    if (node.fused) {
      EXPECT_EQ(node.results.size(), 2u) << fused.graph->to_string();  // a and d
    }
  Tensor other = randn({3, 7});
  NoGradGuard no_grad;
  std::vector<Tensor> got = fused.graph->run({other});
  Tensor a = exp(add(other, 1));
  EXPECT_TRUE(allclose(got[0], mul(sigmoid(mul(a, 2)), other), 1e-6, 1e-7));
  EXPECT_TRUE(allclose(got[1], sum(a), 1e-6, 1e-6));
}

TEST_F(Fusion, ComparisonsStayMasksInsideTheLoop) {
  Tensor x = ft({-2.0f, -0.5f, 0.0f, 0.5f, 2.0f, 3.0f, -1.0f, 4.0f, -3.0f, 1.5f, 0.25f});
  Tensor g = arange(11, TensorOptions(DType::Float32));
  auto program = [](const std::vector<Tensor>& in) {
    Tensor scaled = mul(in[1], 3);
    return std::vector<Tensor>{where(gt(in[0], 0), scaled, neg(scaled))};
  };
  auto graph = record({x, g}, program);
  FusionResult fused = fuse_pointwise(graph, {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(fused.graph->run({x, g})[0], program({x, g})[0], 0.0, 0.0));
}

TEST_F(Fusion, WhatDoesNotFitEndsARun) {
  Tensor x = randn({4, 6});
  auto graph = record({x}, [](const std::vector<Tensor>& in) {
    Tensor a = tanh(in[0]);  // one op alone before the matmul: nothing to fuse
    Tensor m = mm(a, transpose(a, 0, 1));
    Tensor t = transpose(in[0], 0, 1);  // not contiguous: not read by a loop
    return std::vector<Tensor>{exp(mul(m, 2)), add(t, 1)};
  });
  FusionResult fused = fuse_pointwise(graph, {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();  // mul then exp, after the matmul
  EXPECT_EQ(fused.ops_fused, 2);
  Tensor other = randn({4, 6});
  NoGradGuard no_grad;
  std::vector<Tensor> got = fused.graph->run({other});
  Tensor a = tanh(other);
  EXPECT_TRUE(allclose(got[0], exp(mul(mm(a, transpose(a, 0, 1)), 2)), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(got[1], add(transpose(other, 0, 1), 1), 0.0, 0.0));
}

TEST_F(Fusion, PerRowStatisticsAndCastsJoinTheLoop) {
  // Layer norm's pattern: (x - mean) * rstd with [4, 1] statistics; relu's backward: g * (x > 0).to(float32).
  Tensor x = randn({4, 6}), g = randn({4, 6});
  auto program = [](const std::vector<Tensor>& in) {
    Tensor mu = mean(in[0], {1}, true);
    Tensor rstd = rsqrt(add(mean(mul(in[0], in[0]), {1}, true), 1e-5));
    Tensor normed = mul(sub(in[0], mu), rstd);
    return std::vector<Tensor>{normed, mul(in[1], gt(normed, 0).to(DType::Float32))};
  };
  auto graph = record({x, g}, program);
  FusionResult fused = fuse_pointwise(graph, {});
  bool row = false, cast = false;
  for (const auto& node : fused.graph->nodes())
    if (node.fused) {
      for (auto kind : node.fused->inputs) row = row || kind == FusedKernel::InputKind::Row;
      for (const std::string& op : node.fused->ops) cast = cast || op == "to";
    }
  EXPECT_TRUE(row && cast) << fused.graph->to_string();
  NoGradGuard no_grad;
  Tensor other = randn({4, 6});
  std::vector<Tensor> got = fused.graph->run({other, g});
  std::vector<Tensor> expected = program({other, g});
  EXPECT_TRUE(allclose(got[0], expected[0], 1e-6, 1e-6));
  EXPECT_TRUE(allclose(got[1], expected[1], 1e-6, 1e-6));
}

TEST_F(Fusion, AnAbandonedRunKeepsTheNumbersMovedPastIt) {
  // mul alone (no loop), then remainder(a, 2): its number 2 is made after the mul, read by remainder, which
  // has no loop code and ends the run; then exp and tanh, a loop (so the new program is used).
  Tensor x = randn({3, 5}), y = randn({3, 5});
  auto program = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{tanh(exp(remainder(mul(in[0], in[1]), 2)))};
  };
  auto graph = record({x, y}, program);
  FusionResult fused = fuse_pointwise(graph, {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(fused.graph->run({x, y})[0], program({x, y})[0], 1e-6, 1e-6));
}

// Reductions join loops: along rows (a per-row value the next pass reads broadcast over the row) and down
// columns (a bias's gradient), as softmax's and layer norm's backward formulas use them.
int count_reductions(const CapturedGraph& g) {
  int n = 0;
  for (const auto& node : g.nodes())
    if (node.fused)
      for (const std::string& op : node.fused->ops) n += op == "sum" || op == "mean" || op == "amax";
  return n;
}

TEST_F(Fusion, SoftmaxsBackwardIsOneLoopOfTwoPassesOverEachRow) {
  // dx = y * (g - sum(g * y, -1)), over [6, 37]: each row ends in a masked tail.
  Tensor y = softmax(randn({6, 37}), 1), g = randn({6, 37});
  auto program = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(in[0], sub(in[1], sum(mul(in[1], in[0]), {-1}, true)))};
  };
  auto graph = record({y, g}, program);
  FusionResult fused = fuse_pointwise(graph, {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  EXPECT_EQ(count_fused(*fused.graph), 1) << fused.graph->to_string();  // nothing else left
  EXPECT_EQ(count_reductions(*fused.graph), 1);
  EXPECT_NE(fused.source.find("_pass1"), std::string::npos);
  Tensor y2 = softmax(randn({6, 37}), 1), g2 = randn({6, 37});
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(fused.graph->run({y2, g2})[0], program({y2, g2})[0], 1e-5, 1e-6));
}

TEST_F(Fusion, LayerNormsBackwardIsOneLoopWithItsColumnSums) {
  // The formula of autograd/functions/nn_formulas.cc over [300, 37] (300 rows: the column sums add in blocks of
  // 128 rows, and the last block is partial); mean and rstd come as [300, 1] statistics, the weight by column.
  Tensor x = randn({300, 37}), g = randn({300, 37}), w = randn({37});
  Tensor mu = mean(x, {1}, true);
  Tensor rstd = rsqrt(add(mean(mul(sub(x, mu), sub(x, mu)), {1}, true), 1e-5));
  auto program = [](const std::vector<Tensor>& in) {
    const Tensor &xs = in[0], &gr = in[1], &wt = in[2], &m = in[3], &rs = in[4];
    Tensor x_hat = mul(sub(xs, m), rs);
    Tensor dx_hat = mul(gr, wt);
    Tensor inner = mean(mul(dx_hat, x_hat), {1}, true);
    Tensor dx = mul(rs, sub(sub(dx_hat, mean(dx_hat, {1}, true)), mul(x_hat, inner)));
    return std::vector<Tensor>{dx, sum(mul(gr, x_hat), {0}), sum(gr, {0})};
  };
  auto graph = record({x, g, w, mu, rstd}, program);
  FusionResult fused = fuse_pointwise(graph, {});
  EXPECT_EQ(fused.loops, 1) << fused.graph->to_string();
  EXPECT_EQ(count_fused(*fused.graph), 1) << fused.graph->to_string();
  EXPECT_EQ(count_reductions(*fused.graph), 4);
  NoGradGuard no_grad;
  std::vector<Tensor> got = fused.graph->run({x, g, w, mu, rstd});
  std::vector<Tensor> expected = program({x, g, w, mu, rstd});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].sizes(), (IntList{37}));
  EXPECT_TRUE(allclose(got[0], expected[0], 1e-4, 1e-5));
  EXPECT_TRUE(allclose(got[1], expected[1], 1e-4, 1e-4));
  EXPECT_TRUE(allclose(got[2], expected[2], 1e-4, 1e-4));
  // Run twice: the column sums start from zero each time.
  EXPECT_TRUE(allclose(fused.graph->run({x, g, w, mu, rstd})[2], expected[2], 1e-4, 1e-4));
}

TEST_F(Fusion, AmaxInALoopLetsNaNWinAndMeanOfEverythingIsOneRow) {
  Tensor x = randn({5, 19});
  x.data<float>()[2 * 19 + 18] = std::nanf("");  // in row 2's tail
  auto program = [](const std::vector<Tensor>& in) {
    Tensor shifted = exp(sub(in[0], amax(in[0], {-1}, true)));
    return std::vector<Tensor>{shifted, mean(pow(in[0], 2))};  // (the mean reads the NaN too)
  };
  auto graph = record({x}, program);
  FusionResult fused = fuse_pointwise(graph, {});
  // amax joins the loop; the mean of everything is over other rows (one of 95 columns), so it ends the run, alone.
  EXPECT_EQ(count_reductions(*fused.graph), 1) << fused.graph->to_string();
  NoGradGuard no_grad;
  std::vector<Tensor> got = fused.graph->run({x});
  std::vector<Tensor> expected = program({x});
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 19; ++c) {
      const float a = got[0].data<float>()[r * 19 + c], b = expected[0].data<float>()[r * 19 + c];
      if (r == 2) {
        EXPECT_TRUE(std::isnan(a)) << c;
      } else {
        EXPECT_NEAR(a, b, 1e-6) << r << "," << c;
      }
    }
  EXPECT_TRUE(std::isnan(got[1].item<float>()));
  // Without the NaN: a long row (past 1024 columns, where sums move into double) matches a double reference.
  Tensor big = randn({2, 5000});
  auto mean_of_all = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{mean(mul(in[0], 3))}; };
  FusionResult fused_mean = fuse_pointwise(record({big}, mean_of_all), {});
  EXPECT_EQ(count_reductions(*fused_mean.graph), 1) << fused_mean.graph->to_string();
  double want_mean = 0;
  for (int64_t k = 0; k < 10000; ++k) want_mean += 3.0 * big.data<float>()[k];
  EXPECT_NEAR(fused_mean.graph->run({big})[0].item<float>(), want_mean / 10000, 1e-6);
  auto row_sums = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(exp(mul(in[0], 0.5)), {1})}; };
  FusionResult fused_sums = fuse_pointwise(record({big}, row_sums), {});
  EXPECT_EQ(count_reductions(*fused_sums.graph), 1) << fused_sums.graph->to_string();
  Tensor got_sums = fused_sums.graph->run({big})[0];
  for (int64_t r = 0; r < 2; ++r) {
    double want = 0;
    for (int64_t c = 0; c < 5000; ++c) want += std::exp(0.5 * big.data<float>()[r * 5000 + c]);
    EXPECT_NEAR(got_sums.data<float>()[r], want, 1e-6 * want) << r;
  }
}

TEST_F(Fusion, ReductionsThatDoNotFitStayEager) {
  // sum over the last dim without keepdim is [16], which x - s broadcasts by column: not the per-row value a
  // loop would read; a sum over a middle dim; a column sum read in the same run.
  Tensor x = randn({16, 16}), y = randn({4, 5, 6});
  auto program = [](const std::vector<Tensor>& in) {
    Tensor by_column = sub(exp(in[0]), sum(exp(in[0]), {1}));
    Tensor middle = mul(sum(tanh(in[1]), {1}, true), 2);
    Tensor col = sum(exp(in[0]), {0});
    return std::vector<Tensor>{by_column, middle, mul(exp(in[0]), col)};
  };
  auto graph = record({x, y}, program);
  FusionResult fused = fuse_pointwise(graph, {});
  NoGradGuard no_grad;
  std::vector<Tensor> got = fused.graph->run({x, y});
  std::vector<Tensor> expected = program({x, y});
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(allclose(got[k], expected[k], 1e-5, 1e-5)) << k << fused.graph->to_string();
}

TEST_F(Fusion, DeadNodesGoAndWritesToInputsStay) {
  Tensor x = ft({1.0f, 2.0f}), counter = ft({0.0f, 0.0f});
  auto program = [](const std::vector<Tensor>& in) {
    Tensor unused = exp(sum(in[0]));  // read by nothing: dead (sum and exp)
    Tensor c = in[1];
    add_(c, 1);                       // a write to an input: stays
    return std::vector<Tensor>{mul(in[0], 3)};
  };
  auto graph = record({x, counter}, program);
  int removed = 0;
  auto live = eliminate_dead_nodes(graph, {}, &removed);
  EXPECT_GE(removed, 2) << graph->to_string();
  NoGradGuard no_grad;
  Tensor fresh_counter = ft({5.0f, 5.0f});
  EXPECT_TRUE(allclose(live->run({x, fresh_counter})[0], ft({3.0f, 6.0f}), 0.0, 0.0));
  EXPECT_TRUE(allclose(fresh_counter, ft({6.0f, 6.0f}), 0.0, 0.0)) << live->to_string();
  int none = -1;
  EXPECT_EQ(eliminate_dead_nodes(live, {}, &none), live);
  EXPECT_EQ(none, 0);
}

TEST_F(Fusion, KernelsAreCompiledOnceThenFoundInTheCache) {
  const std::string source = loops_prelude() + "extern \"C\" int answer() { return 42; }\n";
  auto first = KernelLibrary::load(source);
  EXPECT_TRUE(first->compiled_now());
  auto second = KernelLibrary::load(source);
  EXPECT_FALSE(second->compiled_now());
  EXPECT_EQ(first->path(), second->path());
  EXPECT_EQ(reinterpret_cast<int (*)()>(second->symbol("answer"))(), 42);
  expect_error<ValueError>([&] { second->symbol("question"); }, {"has no function question"});
}

TEST_F(Fusion, AFailingCompilerIsAnErrorThatSaysSo) {
  setenv("CXX", "/bin/false", 1);
  expect_error<ValueError>([] { KernelLibrary::load("int x;"); }, {"the C++ compiler failed", "exit 1"});
  setenv("CXX", "/nonexistent/c++", 1);
  expect_error<ValueError>([] { KernelLibrary::load("int y;"); }, {"cannot start the C++ compiler", "set CXX"});
  unsetenv("CXX");
  expect_error<ValueError>([] { KernelLibrary::load("this is not C++"); }, {"the C++ compiler failed", "error"});
}

// The joint graph of program(x) (one scalar output), recorded from one call.
template <typename F>
std::shared_ptr<JointGraph> record_joint(F program, const Tensor& x) {
  auto graph = std::make_shared<CapturedGraph>();
  GraphCapture capture(*graph, {x});
  Tensor y = program(x);
  capture.finish({y});
  std::string why;
  std::shared_ptr<JointGraph> joint = JointGraph::record(graph, capture, {x}, {y}, &why);
  EXPECT_NE(joint, nullptr) << why;
  return joint;
}

// The gradients of `weights` from backward through joint->run(x), then from eager program(x): equal. Leaves
// the weights without gradients.
template <typename F>
void expect_eager_gradients(const JointGraph& joint, F program, const Tensor& x, const std::vector<Tensor>& weights) {
  Tensor y = joint.run({x})[0];
  EXPECT_EQ(grad_fn(y)->name(), "CompiledFunctionBackward");
  backward(y, Tensor());
  std::vector<Tensor> replayed;
  for (const Tensor& w : weights) {
    replayed.push_back(grad(w));
    set_grad(w, Tensor());
  }
  backward(program(x), Tensor());
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_TRUE(allclose(replayed[i], grad(weights[i]), 1e-5, 1e-6)) << i << replayed[i] << grad(weights[i]);
    set_grad(weights[i], Tensor());  // (the next check starts from no gradient)
  }
}

TEST_F(Fusion, AJointGraphsBackwardGivesEagersGradientsFromOneNode) {
  Tensor w = randn({6, 5});
  Tensor b = randn({5});
  set_requires_grad(w, true);
  set_requires_grad(b, true);
  auto program = [&](const Tensor& x) { return sum(mul(gelu(add(mm(x, w), b)), 0.5)); };
  std::shared_ptr<JointGraph> joint = record_joint(program, randn({4, 6}));
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint->fusion_note().find("backward: 1 loops"), std::string::npos) << joint->fusion_note();
  expect_eager_gradients(*joint, program, randn({4, 6}), {w, b});
}

TEST_F(Fusion, ABackwardRecomputesWhatOneCheapPointwiseOpMadeFromSavedValues) {
  // h = tanh(x @ w) * gain feeds h @ v: v's gradient reads h, the mul's reads tanh's output and gain (saved
  // anyway), so h is made again, not kept. tanh's output itself is kept: tanh costs more than it saves.
  Tensor w = randn({5, 6}), gain = randn({6}), v = randn({6, 3});
  for (Tensor* t : {&w, &gain, &v}) set_requires_grad(*t, true);
  auto program = [&](const Tensor& x) { return sum(mm(mul(tanh(mm(x, w)), gain), v)); };
  std::shared_ptr<JointGraph> joint = record_joint(program, randn({4, 5}));
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint->fusion_note().find("1 saved values recomputed in backward (0 kB"), std::string::npos)
      << joint->fusion_note();
  expect_eager_gradients(*joint, program, randn({4, 5}), {w, gain, v});
}


// How many nodes of the backward as run allocate a tensor of `shape`.
int allocations_of(const JointGraph& joint, const IntList& shape) {
  int n = 0;
  for (const CapturedGraph::Node& node : joint.backward_run().nodes()) n += node.is_alloc() && node.alloc_sizes == shape;
  return n;
}

TEST_F(Fusion, TheGradientsOfDisjointPiecesOfOneTensorAreWrittenIntoOneBuffer) {
  // w's three row blocks each multiply x (a packed projection read as three): their gradients, each zeros of w's
  // shape with the block copied in, summed, become one buffer the three blocks are copied into.
  Tensor w = randn({6, 5});
  set_requires_grad(w, true);
  auto program = [&](const Tensor& x) {
    auto block = [&](std::optional<int64_t> lo, std::optional<int64_t> hi) {
      return mm(x, transpose(slice(w, 0, lo, hi, 1), 0, 1));
    };
    Tensor a = block(0, 2), b = block(2, 4), c = block(-2, std::nullopt);
    return sum(mul(add(mul(a, b), c), 0.5));
  };
  std::shared_ptr<JointGraph> joint = record_joint(program, randn({3, 5}));
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint->fusion_note().find("1 sums of pieces written in place"), std::string::npos) << joint->fusion_note();
  EXPECT_EQ(allocations_of(*joint, {6, 5}), 1) << joint->backward_run().to_string();
  EXPECT_EQ(joint->backward_run().to_string().find("fill_"), std::string::npos) << "the pieces cover w: no fill";
  expect_eager_gradients(*joint, program, randn({3, 5}), {w});
  expect_eager_gradients(*joint, program, randn({3, 5}), {w});  // (the buffer is a new one each run)
}

TEST_F(Fusion, PiecesThatLeaveRowsOutKeepTheFillAndOverlappingOnesAreNotFolded) {
  Tensor w = randn({4, 3});
  set_requires_grad(w, true);
  // rows 0 and 2 (select), not 1 or 3: one buffer, filled with zeros first
  auto gaps = [&](const Tensor& x) { return sum(add(mul(x, select(w, 0, 0)), mul(x, select(w, 0, 2)))); };
  std::shared_ptr<JointGraph> joint = record_joint(gaps, randn({2, 3}));
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint->fusion_note().find("1 sums of pieces written in place"), std::string::npos) << joint->fusion_note();
  EXPECT_EQ(allocations_of(*joint, {4, 3}), 1);
  EXPECT_NE(joint->backward_run().to_string().find("fill_"), std::string::npos);
  expect_eager_gradients(*joint, gaps, randn({2, 3}), {w});
  // rows [0, 3) and [1, 4) overlap: summed as recorded
  auto overlap = [&](const Tensor& x) {
    return sum(add(mm(x, transpose(slice(w, 0, 0, 3, 1), 0, 1)), mm(x, transpose(slice(w, 0, 1, 4, 1), 0, 1))));
  };
  joint = record_joint(overlap, randn({2, 3}));
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint->fusion_note().find("0 sums of pieces"), std::string::npos) << joint->fusion_note();
  EXPECT_EQ(allocations_of(*joint, {4, 3}), 2);
  expect_eager_gradients(*joint, overlap, randn({2, 3}), {w});
}


int count_op(const CapturedGraph& g, const std::string& name) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op != nullptr && node.op->name() == name;
  return n;
}

TEST_F(Fusion, ALinearLayersActivationGoesIntoItsGemm) {
  // relu(x @ w.T + b) on 2-D input, and gelu of the same on 3-D input (the rows' product viewed back)
  Tensor x = randn({6, 16}), x3 = randn({2, 3, 16}), w = randn({24, 16}), b = randn({24});
  auto graph = record({x, x3}, [&](const std::vector<Tensor>& in) {
    Tensor h = relu(addmm(b, in[0], t(w)));
    Tensor h3 = gelu(view(addmm(b, reshape(in[1], {6, 16}), t(w)), {2, 3, 24}));
    return std::vector<Tensor>{h, h3};
  });
  int folded = 0;
  auto out = fold_gemm_activations(graph, {}, &folded);
  EXPECT_EQ(folded, 2);
  EXPECT_EQ(count_op(*out, "_addmm_activation"), 2) << out->to_string();
  EXPECT_EQ(count_op(*out, "relu") + count_op(*out, "gelu") + count_op(*out, "addmm"), 0) << out->to_string();
  Tensor y = randn({6, 16}), y3 = randn({2, 3, 16});
  NoGradGuard no_grad;
  std::vector<Tensor> got = out->run({y, y3});
  EXPECT_TRUE(allclose(got[0], relu(addmm(b, y, t(w))), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(got[1], gelu(view(addmm(b, reshape(y3, {6, 16}), t(w)), {2, 3, 24})), 1e-5, 1e-6));
}

TEST_F(Fusion, AnActivationStaysWhereTheProductIsReadElsewhereOrItIsNotTheErfGelu) {
  Tensor x = randn({4, 8}), w = randn({8, 8}), b = randn({8});
  auto graph = record({x}, [&](const std::vector<Tensor>& in) {
    Tensor p = addmm(b, in[0], w);
    Tensor kept = relu(p);                                   // p is also an output: not folded
    Tensor tanh_form = gelu(addmm(b, in[0], w), "tanh");     // oneDNN's tanh GELU is not _addmm_activation's
    Tensor read_twice = addmm(b, in[0], w);
    return std::vector<Tensor>{p, kept, tanh_form, relu(read_twice), add(read_twice, 1)};
  });
  int folded = 0;
  auto out = fold_gemm_activations(graph, {}, &folded);
  EXPECT_EQ(folded, 0) << out->to_string();
  // and a value kept for later (a backward) counts as read
  auto single = record({x}, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(addmm(b, in[0], w))}; });
  const int product = single->nodes()[0].results[0].value;
  fold_gemm_activations(single, {product}, &folded);
  EXPECT_EQ(folded, 0);
  fold_gemm_activations(single, {}, &folded);
  EXPECT_EQ(folded, 1);
}

TEST_F(Fusion, ATrainingGraphsReluFoldsAndItsGradientsStayEagers) {
  // relu's backward reads relu's output, not the product: the product is not kept, so relu folds; GELU's backward
  // reads its input, so a GELU layer does not.
  Tensor w1 = randn({16, 6}), b1 = randn({16}), w2 = randn({3, 16}), b2 = randn({3});
  for (Tensor* p : {&w1, &b1, &w2, &b2}) set_requires_grad(*p, true);
  auto program = [&](const Tensor& x) { return sum(addmm(b2, relu(addmm(b1, x, t(w1))), t(w2))); };
  std::shared_ptr<JointGraph> joint = record_joint(program, randn({5, 6}));
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint->fusion_note().find("1 activations in GEMMs"), std::string::npos) << joint->fusion_note();
  EXPECT_EQ(count_op(joint->forward_run(), "_addmm_activation"), 1) << joint->forward_run().to_string();
  expect_eager_gradients(*joint, program, randn({5, 6}), {w1, b1, w2, b2});
  auto with_gelu = [&](const Tensor& x) { return sum(addmm(b2, gelu(addmm(b1, x, t(w1))), t(w2))); };
  joint = record_joint(with_gelu, randn({5, 6}));
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint->fusion_note().find("0 activations in GEMMs"), std::string::npos) << joint->fusion_note();
  expect_eager_gradients(*joint, with_gelu, randn({5, 6}), {w1, b1, w2, b2});
}

}  // namespace
}  // namespace trainrun::compile
