// Graph rewrites that run before fusion: compile/reshaped_reduction.h (a sum
// of a regrouping view reads the tensor under it, and moves next to its
// maker so that it joins that loop). Each rewritten graph computes what the
// recorded ops computed.
#include <gtest/gtest.h>

#include "compile/fusion.h"
#include "compile/reshaped_reduction.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/linalg.h"
#include "tensor/nn_functional.h"
#include "tensor/reductions.h"
#include "tensor/views.h"
#include "tests/compile/record_graph.h"
#include "tests/compile/temp_kernel_cache.h"
#include "tests/tensor/test_util.h"

namespace trainrun::compile {
namespace {

int count_op(const CapturedGraph& g, const std::string& name) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op != nullptr && node.op->name() == name;
  return n;
}

void expect_same_results(const CapturedGraph& a, const CapturedGraph& b, const std::vector<Tensor>& inputs) {
  const std::vector<Tensor> x = a.run(inputs), y = b.run(inputs);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].sizes(), y[i].sizes()) << "output " << i;
    EXPECT_TRUE(allclose(x[i], y[i], 1e-5, 1e-5)) << "output " << i;
  }
}

// A linear layer's backward on [B, S, F]: its bias gradient sums the rows of g viewed as [B*S, F]; g is relu's.
std::vector<Tensor> bias_grad(const std::vector<Tensor>& in) {
  Tensor g = relu(in[0]);
  Tensor rows = view(g, {6, 8});
  return {sum(rows, {0}), mm(rows, in[1]), view(sum(view(g, {2, 24}), {1}, /*keepdim=*/true), {2}),
          sum(view(g, {6, 8}), {0}, /*keepdim=*/true)};
}

class ReshapedReduction : public TempKernelCache {};

TEST_F(ReshapedReduction, SumsOfRegroupingViewsReadTheirBaseAndJoinItsLoop) {
  const std::vector<Tensor> inputs = {randn({2, 3, 8}), randn({8, 5})};
  auto graph = record(inputs, bias_grad);
  int moved = 0;
  auto rewritten = reduce_under_views(graph, &moved);
  // sum over [0] of [6, 8] is sum over [0, 1] of [2, 3, 8]; sum over [1] of [2, 24] (keepdim, then viewed) is
  // over [1, 2]; the last keepdim sum is an output itself, so its shape stays and it is not moved.
  EXPECT_EQ(moved, 2) << rewritten->to_string();
  EXPECT_EQ(count_op(*rewritten, "sum"), 3);
  expect_same_results(*graph, *rewritten, inputs);
  const FusionResult fused = fuse_pointwise(rewritten, {});
  // The column sum joins relu's loop (rows of 8); the row sum (rows of 24) cannot share that loop.
  EXPECT_EQ(fused.loops, 1);
  EXPECT_EQ(count_op(*fused.graph, "sum"), 2) << fused.graph->to_string();
  expect_same_results(*graph, *fused.graph, inputs);
}

// sum_to's form: keepdim=True, then a view drops the kept dims.
std::vector<Tensor> summed_to(const std::vector<Tensor>& in) {
  Tensor g = mul(in[0], 2);
  return {view(sum(view(g, {12, 4}), {0}, /*keepdim=*/true), {4}), sum(view(g, {4, 12}), {0})};
}

TEST_F(ReshapedReduction, KeepdimSumsReadOnlyByViewsDropTheirDimsAndViewsThatSplitRowsStay) {
  const std::vector<Tensor> inputs = {randn({3, 4, 4})};
  auto graph = record(inputs, summed_to);
  int moved = 0;
  auto rewritten = reduce_under_views(graph, &moved);
  // [3, 4, 4] as [4, 12]: its first dim (4) is no group of leading dims of [3, 4, 4] (3, 12, 48): not moved.
  EXPECT_EQ(moved, 1) << rewritten->to_string();
  expect_same_results(*graph, *rewritten, inputs);
}

// The base written in place after the view is made: the sum must read the written values, so it stays where it was.
std::vector<Tensor> written_between(const std::vector<Tensor>& in) {
  Tensor g = relu(in[0]);
  Tensor rows = view(g, {6, 8});
  mul_(g, 2);
  return {sum(rows, {0})};
}

// The base written in place after the sum: the sum reads the values from before, so it must not move past the write.
std::vector<Tensor> written_after(const std::vector<Tensor>& in) {
  Tensor g = relu(in[0]);
  Tensor s = sum(view(g, {6, 8}), {0});
  mul_(g, 2);
  return {s, g};
}

// A sum of a moved sum: both move, the second after the first.
std::vector<Tensor> sum_of_sum(const std::vector<Tensor>& in) {
  Tensor g = relu(in[0]);
  Tensor s = sum(view(g, {6, 8}), {0});
  return {sum(view(s, {2, 4}), {0, 1}), exp(g)};
}

TEST_F(ReshapedReduction, ASumMovesOnlyPastNoWriteToItsBaseAndChainsOfMovesKeepEveryNode) {
  for (auto program : {written_between, written_after, sum_of_sum}) {
    const std::vector<Tensor> inputs = {randn({2, 3, 8})};
    auto graph = record(inputs, program);
    int moved = 0;
    auto rewritten = reduce_under_views(graph, &moved);
    EXPECT_GE(moved, 1) << rewritten->to_string();
    EXPECT_EQ(rewritten->num_nodes(), graph->num_nodes());
    expect_same_results(*graph, *rewritten, inputs);
    expect_same_results(*graph, *fuse_pointwise(rewritten, {}).graph, inputs);
  }
}

}  // namespace
}  // namespace trainrun::compile
