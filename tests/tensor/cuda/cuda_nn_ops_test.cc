// The CUDA kernels of the nn and indexing ops against the CPU: softmax,
// layer_norm / rms_norm, lerp / addcmul / addcdiv, fused Adam, index_select /
// embedding, gather, scatter, index_add, masked_select, nonzero, sort, topk,
// conv2d and its backward, and the pools. Skipped without a GPU.
#include <gtest/gtest.h>

#include "tensor/fused_optim.h"
#include "tests/expect_error.h"
#include "tests/tensor/cuda/gpu_test_util.h"

namespace trainrun::cuda {
namespace {

Tensor randn_cpu(IntList shape, uint64_t seed, DType dt = DType::Float32) {
  Generator g(seed);
  return randn(shape, DType::Float64, &g).to(dt);
}

class CudaNnOps : public GpuTest {};

TEST_F(CudaNnOps, SoftmaxAndNormsMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float64}) {
    const double r = rtol_for(dt) * 4;
    for (IntList shape : {IntList{4, 7}, IntList{3, 5000}, IntList{2, 3, 130}}) {
      Tensor x = randn_cpu(shape, 1, dt);
      expect_same(softmax(x.cuda(), -1), softmax(x, -1), r, 1e-6, "softmax");
      expect_same(log_softmax(x.cuda(), -1), log_softmax(x, -1), r, 1e-5, "log_softmax");
      expect_same(softmax(x.cuda(), 0), softmax(x, 0), r, 1e-6, "softmax dim 0");
      const int64_t n = shape.back();
      Tensor w = randn_cpu({n}, 2, dt), b = randn_cpu({n}, 3, dt);
      auto [go, gm, gr] = layer_norm(x.cuda(), {n}, w.cuda(), b.cuda(), 1e-5);
      auto [co, cm, cr] = layer_norm(x, {n}, w, b, 1e-5);
      expect_same(go, co, r * 4, 1e-4, "layer_norm");
      expect_same(gm, cm, r * 4, 1e-5, "layer_norm mean");
      expect_same(gr, cr, r * 4, 1e-5, "layer_norm rstd");
      auto [ro, rr] = rms_norm(x.cuda(), {n}, w.cuda(), 1e-6);
      auto [so, sr] = rms_norm(x, {n}, w, 1e-6);
      expect_same(ro, so, r * 4, 1e-4, "rms_norm");
    }
  }
}

TEST_F(CudaNnOps, TernaryOpsAndFusedAdamMatchTheCpu) {
  Tensor a = randn_cpu({5, 6}, 4), b = randn_cpu({5, 6}, 5), c = add(abs(randn_cpu({6}, 6)), scalar_tensor(0.5));
  expect_same(lerp(a.cuda(), b.cuda(), c.cuda()), lerp(a, b, c), 1e-6);
  expect_same(addcmul(a.cuda(), b.cuda(), c.cuda(), 0.3), addcmul(a, b, c, 0.3), 1e-6);
  expect_same(addcdiv(a.cuda(), b.cuda(), c.cuda(), -2), addcdiv(a, b, c, -2), 1e-6);
  for (bool amsgrad : {false, true}) {
    Tensor p = randn_cpu({1000}, 7), g = randn_cpu({1000}, 8), m = randn_cpu({1000}, 9);
    Tensor v = abs(randn_cpu({1000}, 10)), vmax = abs(randn_cpu({1000}, 11));
    Tensor pg = p.cuda(), gg = g.cuda(), mg = m.cuda(), vg = v.cuda(), vmaxg = vmax.cuda();
    AdamStep step{1e-3, 0.9, 0.999, 1e-8, 0.01, 3, amsgrad, false, true};
    fused_adam_(p, g, m, v, vmax, step);
    fused_adam_(pg, gg, mg, vg, vmaxg, step);
    expect_same(pg, p, 1e-6, 1e-7, "adam param");
    expect_same(mg, m, 1e-6, 1e-7, "adam exp_avg");
    expect_same(vg, v, 1e-6, 1e-7, "adam exp_avg_sq");
  }
}

TEST_F(CudaNnOps, IndexingMatchesTheCpu) {
  Tensor x = randn_cpu({6, 5, 4}, 12);
  Tensor idx = tensor<int64_t>({4, 0, -1, 2, 4});
  expect_same(index_select(x.cuda(), 0, idx.cuda()), index_select(x, 0, idx), 0, 0, "index_select dim 0");
  expect_same(index_select(x.cuda(), 0, idx), index_select(x, 0, idx), 0, 0, "a CPU index is copied over");
  Tensor idx2 = tensor<int64_t>({3, 0, -1});  // dim 2 has 4 entries
  expect_same(index_select(x.cuda(), 2, idx2.cuda()), index_select(x, 2, idx2), 0, 0, "index_select dim 2");
  Tensor table = randn_cpu({10, 8}, 13), tokens = tensor<int64_t>({1, 9, 1, 0, 3, 3}, {2, 3});
  expect_same(embedding(table.cuda(), tokens.cuda()), embedding(table, tokens), 0, 0, "embedding");
  Tensor gidx = randint(0, 5, {6, 3, 4}, DType::Int64);
  expect_same(gather(x.cuda(), 1, gidx.cuda()), gather(x, 1, gidx), 0, 0, "gather");
  Tensor src = randn_cpu({6, 3, 4}, 14);
  Tensor sidx = contiguous(expand(arange(3, DType::Int64).view({1, 3, 1}), {6, 3, 4}));  // no duplicates
  expect_same(scatter(x.cuda(), 1, sidx.cuda(), src.cuda()), scatter(x, 1, sidx, src), 0, 0, "scatter");
  expect_same(scatter_add(x.cuda(), 1, gidx.cuda(), src.cuda()), scatter_add(x, 1, gidx, src), 1e-5, 1e-6,
              "scatter_add");
  Tensor rows = tensor<int64_t>({0, 2, 0});
  Tensor add_src = randn_cpu({3, 5, 4}, 15);
  expect_same(index_add(x.cuda(), 0, rows.cuda(), add_src.cuda(), 0.5), index_add(x, 0, rows, add_src, 0.5), 1e-5,
              1e-6, "index_add");
  Tensor mask = gt(x, scalar_tensor(0.3));
  expect_same(masked_select(x.cuda(), mask.cuda()), masked_select(x, mask), 0, 0, "masked_select");
  expect_same(nonzero(mask.cuda()), nonzero(mask), 0, 0, "nonzero");
  expect_error<IndexError>([&] { index_select(x.cuda(), 0, tensor<int64_t>({7}).cuda()); },
                           {"index_select", "index 7 is out of bounds for dim 0 with size 6"});
}

TEST_F(CudaNnOps, SortAndTopkMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Int64, DType::BFloat16}) {
    Tensor x = dt == DType::Int64 ? randint(-5, 5, {7, 33}, DType::Int64) : randn_cpu({7, 33}, 16, dt);
    for (bool desc : {false, true}) {
      auto [gv, gi] = sort(x.cuda(), 1, desc);
      auto [cv, ci] = sort(x, 1, desc);
      expect_same(gv, cv, 0, 0, "sort values");
      expect_same(gi, ci, 0, 0, "sort indices (stable)");
    }
    auto [tv, ti] = topk(x.cuda(), 5, 1, true, true);
    auto [uv, ui] = topk(x, 5, 1, true, true);
    expect_same(tv, uv, 0, 0, "topk values");
    auto [sv, si] = sort(x.cuda(), 0);
    auto [rv, ri] = sort(x, 0);
    expect_same(sv, rv, 0, 0, "sort along dim 0");
  }
}

TEST_F(CudaNnOps, ConvolutionAndPoolingMatchTheCpu) {
  struct Case { IntList x, w, stride, pad, dil; int64_t groups; };
  const Case cases[] = {{{2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
                        {{1, 4, 10, 10}, {6, 2, 3, 2}, {2, 1}, {0, 1}, {1, 2}, 2},
                        {{3, 7, 7}, {5, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}};
  for (const Case& c : cases) {
    Tensor x = randn_cpu(c.x, 17, DType::Float64), w = randn_cpu(c.w, 18, DType::Float64);
    Tensor b = randn_cpu({c.w[0]}, 19, DType::Float64);
    Tensor y = conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
    expect_same(conv2d(x.cuda(), w.cuda(), b.cuda(), c.stride, c.pad, c.dil, c.groups), y, 1e-10, 1e-10, "conv2d");
    Tensor gy = randn_cpu(y.sizes(), 20, DType::Float64);
    auto [gx, gw, gb] = conv2d_backward(gy.cuda(), x.cuda(), w.cuda(), c.stride, c.pad, c.dil, c.groups, true, true, true);
    auto [cx, cw, cb] = conv2d_backward(gy, x, w, c.stride, c.pad, c.dil, c.groups, true, true, true);
    expect_same(gx, cx, 1e-10, 1e-10, "conv2d grad input");
    expect_same(gw, cw, 1e-10, 1e-10, "conv2d grad weight");
    expect_same(gb, cb, 1e-10, 1e-10, "conv2d grad bias");
  }
  Tensor x = randn_cpu({2, 3, 11, 9}, 21);
  auto [mo, mi] = max_pool2d(x.cuda(), {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  auto [co, ci] = max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  expect_same(mo, co, 0, 0, "max_pool2d");
  expect_same(mi, ci, 0, 0, "max_pool2d indices");
  for (bool include_pad : {true, false}) {
    Tensor ao = avg_pool2d(x, {3, 2}, {2, 2}, {1, 1}, true, include_pad);
    expect_same(avg_pool2d(x.cuda(), {3, 2}, {2, 2}, {1, 1}, true, include_pad), ao, 1e-5, 1e-6, "avg_pool2d");
    Tensor g = randn_cpu(ao.sizes(), 22);
    expect_same(avg_pool2d_backward(g.cuda(), x.cuda(), {3, 2}, {2, 2}, {1, 1}, true, include_pad),
                avg_pool2d_backward(g, x, {3, 2}, {2, 2}, {1, 1}, true, include_pad), 1e-5, 1e-6,
                "avg_pool2d_backward");
  }
}

}  // namespace
}  // namespace trainrun::cuda
