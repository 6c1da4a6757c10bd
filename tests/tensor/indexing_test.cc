#include <cmath>

#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(Indexing, IndexSelectGather) {
  Tensor x = arange(12).view({3, 4});
  EXPECT_VALUES(index_select(x, 0, it({2, 0})), 8, 9, 10, 11, 0, 1, 2, 3);
  EXPECT_VALUES(index_select(x, 1, tensor<int32_t>({3, -4})), 3, 0, 7, 4, 11, 8);
  EXPECT_VALUES(index_select(x.t(), 0, it({1})), 1, 5, 9);
  EXPECT_VALUES(gather(x, 1, it({0, 3, 1, 1, 2, 0}, {3, 2})), 0, 3, 5, 5, 10, 8);
  EXPECT_VALUES(gather(x, 0, it({2, 0, 1, 2}, {1, 4})), 8, 1, 6, 11);
  expect_error<IndexError>([&] { gather(x, 1, it({4}, {1, 1})); }, {"gather", "index 4", "dim 1"});
  expect_error<TypeError>([&] { index_select(x, 0, ft({0})); }, {"index_select", "float32"});
}

// Along the last dim index_select loads elements by type (and runs a reversed index, a flip's, as one
// backwards loop): every element size, repeated and negative indices, an index that is a permutation but not
// the reversal, the reversal itself, rows enough to be split between threads; against select() one by one.
TEST(Indexing, IndexSelectAlongTheLastDimKeepsEveryElement) {
  for (DType dt : {DType::UInt8, DType::Float16, DType::Float32, DType::Int64}) {
    Tensor x = remainder(arange(3 * 50 * 7, DType::Int64), 101).to(dt).view({3, 50, 7});
    using Index = std::vector<int64_t>;
    for (const Index& idx : {Index{6, 5, 4, 3, 2, 1, 0}, Index{0, 6, 1, 5, 2, 4, 3}, Index{2, -1, 2},
                             Index{6, 5, 4, 3, 2, 1}}) {
      Tensor got = index_select(x, 2, it(idx));
      ASSERT_EQ(got.size(2), static_cast<int64_t>(idx.size()));
      for (size_t k = 0; k < idx.size(); ++k) {
        const int64_t from = idx[k] < 0 ? idx[k] + 7 : idx[k];
        EXPECT_EQ(values(got.select(2, static_cast<int64_t>(k))), values(x.select(2, from))) << dtype_name(dt);
      }
    }
  }
  Tensor wide = randn({600, 300});  // (more rows than one thread's share)
  std::vector<int64_t> back(300);
  for (int64_t i = 0; i < 300; ++i) back[i] = 299 - i;
  Tensor flipped = index_select(wide, 1, it(back));
  EXPECT_EQ(values(flipped.select(1, 0)), values(wide.select(1, 299)));
  EXPECT_EQ(values(flipped.select(1, 299)), values(wide.select(1, 0)));
  EXPECT_EQ(values(index_select(flipped, 1, it(back))), values(wide));
}

// gather along the last dim, with the index covering x's other dims, reads each row in a plain loop: against
// select() one by one, with negative indices, rows enough to be split between threads, and an index out of
// range named as before.
TEST(Indexing, GatherAlongTheLastDimPicksFromEachRow) {
  manual_seed(9);
  Tensor x = randn({300, 40, 50});
  Tensor index = sub(randint(0, 100, {300, 40, 7}), 50);  // [-50, 50)
  Tensor got = gather(x, 2, index);
  const int64_t* idx = index.data<int64_t>();
  for (int64_t r : {int64_t{0}, int64_t{4321}, int64_t{300 * 40 - 1}}) {
    for (int64_t j = 0; j < 7; ++j) {
      const int64_t i = idx[r * 7 + j] < 0 ? idx[r * 7 + j] + 50 : idx[r * 7 + j];
      EXPECT_EQ(got.view({-1, 7}).select(0, r).select(0, j).item<float>(),
                x.view({-1, 50}).select(0, r).select(0, i).item<float>());
    }
  }
  EXPECT_TRUE(allclose(got, gather(x.contiguous().transpose(0, 1).contiguous().transpose(0, 1), 2, index), 0, 0));
  expect_error<IndexError>([&] { gather(x, -1, add(index, 100)); }, {"gather", "out of bounds", "dim 2"});
}

// nonzero goes in chunks of 64K elements (counted, then written from their offsets): rows that cross a chunk,
// a 1-D tensor of several chunks, an empty dim, 0-d, against the coordinates of every true element in order.
TEST(Indexing, NonzeroInChunksListsEveryElementInOrder) {
  manual_seed(5);
  for (IntList shape :
       {IntList{3, 70001}, IntList{(1 << 17) + 5}, IntList{4, 3, 9000}, IntList{5, 0, 3}, IntList{2, 3}}) {
    Tensor mask = gt(randn(shape), 1.0);
    std::vector<double> flat = values(mask);
    std::vector<int64_t> want;
    for (int64_t i = 0; i < static_cast<int64_t>(flat.size()); ++i) {
      if (flat[i] == 0) continue;
      std::vector<int64_t> coord(shape.size());
      for (int64_t d = static_cast<int64_t>(shape.size()) - 1, rem = i; d >= 0; --d) {
        coord[d] = rem % shape[d];
        rem /= shape[d];
      }
      want.insert(want.end(), coord.begin(), coord.end());
    }
    Tensor got = nonzero(mask);
    const int64_t nd = static_cast<int64_t>(shape.size());
    ASSERT_EQ(got.sizes(), (IntList{static_cast<int64_t>(want.size()) / nd, nd}));
    const int64_t* g = got.data<int64_t>();
    ASSERT_EQ(std::vector<int64_t>(g, g + got.numel()), want) << shape.size();
  }
  EXPECT_EQ(nonzero(full({}, 1.0)).sizes(), (IntList{1, 0}));
  EXPECT_EQ(nonzero(full({}, 0.0)).sizes(), (IntList{0, 0}));
}

TEST(Indexing, ScatterScatterAddIndexAdd) {
  Tensor z = zeros({2, 4});
  EXPECT_VALUES(scatter(z, 1, it({3, 0}, {2, 1}), ft({7, 8}, {2, 1})), 0, 0, 0, 7, 8, 0, 0, 0);
  EXPECT_VALUES(scatter(z, 1, it({1}, {1, 1}), 5.0), 0, 5, 0, 0, 0, 0, 0, 0);
  EXPECT_VALUES(scatter_add(zeros({3}), 0, it({0, 2, 0}), ft({1, 2, 3})), 4, 0, 2);
  Tensor acc = zeros({3, 2});
  index_add_(acc, 0, it({2, 2, 0}), ones({3, 2}), 2);
  EXPECT_VALUES(acc, 2, 2, 0, 0, 4, 4);
}

TEST(Indexing, MaskedFillSelectNonzero) {
  Tensor x = arange(6, DType::Float32).view({2, 3});
  Tensor mask = gt(x, 3);
  EXPECT_VALUES(masked_fill(x, mask, -1), 0, 1, 2, 3, -1, -1);
  Tensor row_mask = tensor<bool>({true, false, true});
  EXPECT_VALUES(masked_select(x, row_mask), 0, 2, 3, 5);
  masked_fill_(x, row_mask, 0);
  EXPECT_VALUES(x, 0, 1, 0, 0, 4, 0);
  EXPECT_VALUES(nonzero(x), 0, 1, 1, 1);
  EXPECT_EQ(nonzero(zeros({2, 2})).sizes(), (IntList{0, 2}));
  expect_error<TypeError>([&] { masked_fill(x, it({1, 0, 1}), 0); }, {"masked_fill", "bool"});
}

TEST(Indexing, SortAndTopk) {
  Tensor x = ft({3, 1, NAN, 2, 1}, {5});
  auto [v, i] = sort(x);
  auto vv = values(v);
  EXPECT_EQ(std::vector<double>(vv.begin(), vv.begin() + 4), (std::vector<double>{1, 1, 2, 3}));
  EXPECT_TRUE(std::isnan(vv[4]));
  EXPECT_VALUES(i, 1, 4, 3, 0, 2);  // stable: the two 1s keep their order
  auto [dv, di] = sort(ft({1, 3, 2}), 0, true);
  EXPECT_VALUES(dv, 3, 2, 1);
  Tensor m = ft({1, 9, 3, 7, 5, 0}, {2, 3});
  auto [tv, ti] = topk(m, 2, 1);
  EXPECT_VALUES(tv, 9, 3, 7, 5);
  EXPECT_VALUES(ti, 1, 2, 0, 1);
  auto [sv, si] = topk(m, 1, 0, false);
  EXPECT_VALUES(sv, 1, 5, 0);
  expect_error<IndexError>([&] { topk(m, 4, 1); }, {"topk", "k (4)", "size 3"});
}

TEST(Indexing, CatStack) {
  Tensor a = arange(4).view({2, 2}), b = ft({9, 9}, {1, 2});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.dtype(), DType::Float32);
  EXPECT_VALUES(c, 0, 1, 2, 3, 9, 9);
  EXPECT_VALUES(cat({a, a.t()}, 1), 0, 1, 0, 2, 2, 3, 1, 3);
  EXPECT_VALUES(cat({zeros({0}), ft({1}, {1})}), 1);
  expect_error<ValueError>([&] { cat({a, ft({1, 2, 3}, {1, 3})}); }, {"cat", "[1, 3]", "[2, 2]"});
  Tensor s = stack({ft({1, 2}), ft({3, 4})}, 1);
  EXPECT_EQ(s.sizes(), (IntList{2, 2}));
  EXPECT_VALUES(s, 1, 3, 2, 4);
  expect_error<ValueError>([&] { stack({ft({1}), ft({1, 2})}); }, {"stack", "entry 1"});
}

}  // namespace trainrun
