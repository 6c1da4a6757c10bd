// The CUDA row reductions' reducers (kernels/reducers.h) run on the CPU, with
// rows folded in exactly the order the kernels fold them (reduce_loop.cuh):
// strided per thread, then warp shuffles, then across warps, then across the
// blocks of a split row. Compared with the CPU reductions, this checks what
// the GPU computes (NaN and tie rules, Welford merging, online logsumexp,
// integer sums in int64) on machines without one. The shuffles and barriers
// themselves run only in the GPU suites.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "tensor/cuda/kernels/reducers.h"
#include "tensor/generator.h"
#include "tensor/ops.h"

namespace trainrun::cuda {
namespace {

// One warp's shuffle-down tree (warp_combine): lane l takes lane l + offset,
// or its own value when that lane is past the warp, as __shfl_down_sync does.
template <typename R, typename S>
S warp_combine(const R& r, std::array<S, 32> lanes) {
  for (int offset = 16; offset > 0; offset /= 2) {
    std::array<S, 32> next = lanes;
    for (int l = 0; l < 32; ++l) next[l] = r.combine(lanes[l], l + offset < 32 ? lanes[l + offset] : lanes[l]);
    lanes = next;
  }
  return lanes[0];
}

// Row `x` of `inner` elements reduced as the kernels do with `splits` blocks
// per long row; finishes into output slot `row`.
template <typename T, typename R>
void reduce_row_like_the_gpu(const R& r, const T* x, int64_t inner, int64_t splits, int64_t row) {
  using S = decltype(r.init());
  auto accumulate = [&](int64_t begin, int64_t end, int64_t first, int64_t step) {
    S s = r.init();
    for (int64_t i = begin + first; i < end; i += step) s = r.accumulate(s, convert<opmath<T>>(x[i]), i);
    return s;
  };
  if (inner <= kWarpRowMax) {  // warp_per_row_kernel
    std::array<S, 32> lanes;
    for (int l = 0; l < 32; ++l) lanes[l] = accumulate(0, inner, l, 32);
    r.finish(warp_combine(r, lanes), row);
    return;
  }
  const int64_t chunk = (inner + splits - 1) / splits;
  std::vector<S> partial;
  for (int64_t b = 0; b < splits; ++b) {  // block_per_chunk_kernel, then block_combine
    const int64_t begin = b * chunk, end = std::min(begin + chunk, inner);
    std::array<S, 32> warp_results;
    for (int l = 0; l < 32; ++l) warp_results[l] = r.init();
    for (int w = 0; w < kReduceThreads / 32; ++w) {
      std::array<S, 32> lanes;
      for (int l = 0; l < 32; ++l) lanes[l] = accumulate(begin, end, w * 32 + l, kReduceThreads);
      warp_results[w] = warp_combine(r, lanes);
    }
    partial.push_back(warp_combine(r, warp_results));
  }
  if (splits == 1) {
    r.finish(partial[0], row);
    return;
  }
  std::array<S, 32> lanes;  // combine_partials_kernel
  for (int l = 0; l < 32; ++l) {
    lanes[l] = r.init();
    for (int64_t k = l; k < splits; k += 32) lanes[l] = r.combine(lanes[l], partial[k]);
  }
  r.finish(warp_combine(r, lanes), row);
}

template <typename T, typename R>
void reduce_rows_like_the_gpu(const R& r, const Tensor& rows, int64_t splits) {
  const Tensor x = contiguous(rows);
  for (int64_t row = 0; row < x.size(0); ++row)
    reduce_row_like_the_gpu<T>(r, static_cast<const T*>(x.data_ptr()) + row * x.size(1), x.size(1), splits, row);
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what, double rtol, double atol = 0) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_TRUE(allclose(got.to(DType::Float64), want.to(DType::Float64), rtol, atol, /*equal_nan=*/true))
      << what << "\ngot:  " << got.str() << "\nwant: " << want.str();
}

// Rows with the cases that decide the rules: repeated maxima (first index
// wins), a NaN row, an all -inf row, and plain noise.
Tensor hard_rows(int64_t inner, uint64_t seed) {
  Generator gen(seed);
  Tensor x = contiguous(randn({5, inner}, TensorOptions(DType::Float32), &gen));
  float* p = x.data<float>();
  p[0 * inner + inner / 3] = 9.f;  // row 0: the same maximum three times
  p[0 * inner + inner / 2] = 9.f;
  p[0 * inner + inner - 1] = 9.f;
  p[1 * inner + inner / 2] = std::nanf("");  // row 1: NaN wins
  p[1 * inner + inner - 2] = std::nanf("");
  for (int64_t i = 0; i < inner; ++i) p[2 * inner + i] = -INFINITY;  // row 2: all -inf
  return x;
}

struct Shape {
  int64_t inner, splits;
};
const Shape kShapes[] = {{7, 1}, {1000, 1}, {5000, 1}, {40000, 3}, {70000, 5}};

TEST(Reducers, SumsAndProductsMatchTheCpu) {
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(fmt::format("inner {} splits {}", sh.inner, sh.splits));
    Generator gen(sh.inner);
    const Tensor x = randn({4, sh.inner}, TensorOptions(DType::Float32), &gen);
    Tensor out = empty({4});
    reduce_rows_like_the_gpu<float>(SumReducer<float, false>{out.data<float>(), 1.0}, x, sh.splits);
    expect_equal(out, sum(x, {1}), "sum", 1e-4, 1e-4);
    reduce_rows_like_the_gpu<float>(SumReducer<float, false>{out.data<float>(), 1.0 / sh.inner}, x, sh.splits);
    expect_equal(out, mean(x, {1}), "mean", 1e-4, 1e-6);

    // bfloat16 reads as __nv_bfloat16, sums in float and rounds back once.
    const Tensor xb = x.to(DType::BFloat16);
    Tensor bout = empty({4}, TensorOptions(DType::BFloat16));
    reduce_rows_like_the_gpu<__nv_bfloat16>(
        SumReducer<__nv_bfloat16, false>{static_cast<__nv_bfloat16*>(bout.data_ptr()), 1.0}, xb, sh.splits);
    expect_equal(bout, sum(xb, {1}), "bfloat16 sum", 1e-2, 1e-2);

    // Integers sum in int64 without overflowing their own type.
    const Tensor ints = add(mul(randint(-100, 100, {4, sh.inner}, DType::Int32, &gen), scalar_tensor(20000000)),
                            scalar_tensor(1));
    Tensor isum = empty({4}, TensorOptions(DType::Int64));
    reduce_rows_like_the_gpu<int32_t>(SumReducer<int32_t, false>{isum.data<int64_t>(), 1.0}, ints, sh.splits);
    expect_equal(isum, sum(ints, {1}), "int32 sum", 0);

    const Tensor near_one = add(mul(rand({4, sh.inner}, TensorOptions(DType::Float64), &gen), scalar_tensor(1e-4)),
                                scalar_tensor(1.0));
    Tensor pout = empty({4}, TensorOptions(DType::Float64));
    reduce_rows_like_the_gpu<double>(SumReducer<double, true>{pout.data<double>(), 1.0}, near_one, sh.splits);
    expect_equal(pout, prod(near_one, {1}), "prod", 1e-10);
  }
}

TEST(Reducers, MaxMinAndArgFollowNanAndFirstIndexRules) {
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(fmt::format("inner {} splits {}", sh.inner, sh.splits));
    const Tensor x = hard_rows(sh.inner, 100 + sh.inner);
    Tensor values = empty({5}), indices = empty({5}, TensorOptions(DType::Int64));
    reduce_rows_like_the_gpu<float>(ExtremeReducer<float, true>{values.data<float>(), indices.data<int64_t>()}, x,
                                    sh.splits);
    auto [want_max, want_arg] = max(x, 1);
    expect_equal(values, want_max, "max values", 0);
    expect_equal(indices, want_arg, "max indices", 0);
    reduce_rows_like_the_gpu<float>(ExtremeReducer<float, false>{nullptr, indices.data<int64_t>()}, x, sh.splits);
    expect_equal(indices, argmin(x, 1), "argmin", 0);
  }
}

TEST(Reducers, AllAnyNormsVarianceAndLogsumexpMatchTheCpu) {
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(fmt::format("inner {} splits {}", sh.inner, sh.splits));
    const Tensor hard = hard_rows(sh.inner, 200 + sh.inner);
    Generator gen(300 + sh.inner);
    const Tensor x = randn({5, sh.inner}, TensorOptions(DType::Float32), &gen);

    const Tensor flags = gt(x, scalar_tensor(-2.5));  // some rows all true, most not
    Tensor b = empty({5}, TensorOptions(DType::Bool));
    reduce_rows_like_the_gpu<bool>(AllReducer<bool, true>{b.data<bool>()}, flags, sh.splits);
    expect_equal(b, all(flags, {1}), "all", 0);
    reduce_rows_like_the_gpu<bool>(AllReducer<bool, false>{b.data<bool>()}, lt(x, scalar_tensor(-3.0)), sh.splits);
    expect_equal(b, any(lt(x, scalar_tensor(-3.0)), {1}), "any", 0);

    Tensor out = empty({5});
    reduce_rows_like_the_gpu<float>(NormReducer<float, ReduceKind::Norm1>{out.data<float>(), 1.f}, x, sh.splits);
    expect_equal(out, norm(x, 1, {1}), "norm 1", 1e-4);
    reduce_rows_like_the_gpu<float>(NormReducer<float, ReduceKind::Norm2>{out.data<float>(), 2.f}, x, sh.splits);
    expect_equal(out, norm(x, 2, {1}), "norm 2", 1e-4);
    reduce_rows_like_the_gpu<float>(NormReducer<float, ReduceKind::NormP>{out.data<float>(), 3.f}, x, sh.splits);
    expect_equal(out, norm(x, 3, {1}), "norm 3", 1e-4);
    reduce_rows_like_the_gpu<float>(NormReducer<float, ReduceKind::NormInf>{out.data<float>(), 0.f}, hard, sh.splits);
    expect_equal(out, norm(hard, INFINITY, {1}), "norm inf", 0);

    reduce_rows_like_the_gpu<float>(VarReducer<float>{out.data<float>(), 1}, x, sh.splits);
    expect_equal(out, var(x, {1}, 1), "var", 1e-4);
    reduce_rows_like_the_gpu<float>(VarReducer<float>{out.data<float>(), 0}, hard, sh.splits);
    expect_equal(out, var(hard, {1}, 0), "var with NaN and inf rows", 1e-4);

    reduce_rows_like_the_gpu<float>(LogSumExpReducer<float>{out.data<float>()}, hard, sh.splits);
    expect_equal(out, logsumexp(hard, {1}), "logsumexp", 1e-5, 1e-5);
  }
}

}  // namespace
}  // namespace trainrun::cuda
