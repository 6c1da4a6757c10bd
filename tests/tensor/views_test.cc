#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(Views, ShareStorageAndBumpVersionTogether) {
  Tensor x = arange(12, DType::Float32).view({3, 4});
  Tensor v = x.transpose(0, 1);
  EXPECT_EQ(v.sizes(), (IntList{4, 3}));
  EXPECT_EQ(v.strides(), (IntList{1, 4}));
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.data_ptr(), x.data_ptr());
  uint64_t before = x.impl()->version();
  Tensor s = v.select(0, 1);  // column 1 of x
  fill_(s, 100);
  EXPECT_VALUES(x.select(1, 1), 100, 100, 100);
  EXPECT_GT(x.impl()->version(), before);
}

TEST(Views, ViewVersusReshape) {
  Tensor x = arange(6).view({2, 3});
  Tensor t = x.t();
  expect_error<ValueError>([&] { t.view({6}); }, {"view", "reshape"});
  Tensor r = t.reshape({6});  // must copy
  EXPECT_NE(r.data_ptr(), x.data_ptr());
  EXPECT_VALUES(r, 0, 3, 1, 4, 2, 5);
  EXPECT_EQ(x.reshape({3, -1}).data_ptr(), x.data_ptr());  // no copy when possible
  EXPECT_EQ(x.view({-1}).sizes(), (IntList{6}));
  expect_error<ValueError>([&] { x.view({4, -1}); }, {"[4, -1]", "6"});
  expect_error<ValueError>([&] { x.view({-1, -1}); }, {"only one dimension"});
}

TEST(Views, SliceNarrowSelectWithSteps) {
  Tensor x = arange(10);
  EXPECT_VALUES(x.slice(0, 1, 8, 3), 1, 4, 7);
  EXPECT_VALUES(x.slice(0, -3, std::nullopt), 7, 8, 9);
  EXPECT_VALUES(x.slice(0, 20, 30), );
  EXPECT_VALUES(x.narrow(0, 2, 3), 2, 3, 4);
  expect_error<IndexError>([&] { x.narrow(0, 8, 3); }, {"narrow", "size (10)"});
  expect_error<IndexError>([&] { x.select(0, 10); }, {"select", "index 10", "size 10"});
  expect_error<IndexError>([&] { x.select(1, 0); }, {"select", "dim 1"});
  expect_error<ValueError>([&] { x.slice(0, 0, 5, 0); }, {"step"});
}

TEST(Views, ExpandSqueezeUnsqueezeFlatten) {
  Tensor x = arange(3).view({3, 1});
  Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (IntList{0, 1, 0}));
  EXPECT_VALUES(e.select(0, 1).select(1, 3), 0, 1, 2);
  expect_error<ValueError>([&] { x.expand({3, 2, 2}); }, {"expand", "non-singleton"});
  EXPECT_EQ(x.squeeze().sizes(), (IntList{3}));
  EXPECT_EQ(x.unsqueeze(0).sizes(), (IntList{1, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).sizes(), (IntList{3, 1, 1}));
  Tensor y = zeros({2, 3, 4, 5});
  EXPECT_EQ(y.flatten(1, 2).sizes(), (IntList{2, 12, 5}));
  EXPECT_EQ(unflatten(y, 1, {3, 1}).sizes(), (IntList{2, 3, 1, 4, 5}));
  EXPECT_EQ(zeros({}).flatten().sizes(), (IntList{1}));
}

TEST(Views, PermuteDiagonalAsStrided) {
  Tensor x = arange(24).view({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (IntList{4, 2, 3}));
  EXPECT_EQ(p.strides(), (IntList{1, 12, 4}));
  expect_error<ValueError>([&] { x.permute({0, 0, 1}); }, {"repeated"});
  Tensor m = arange(9).view({3, 3});
  EXPECT_VALUES(diagonal(m), 0, 4, 8);
  EXPECT_VALUES(diagonal(m, 1), 1, 5);
  EXPECT_VALUES(diagonal(m, -1), 3, 7);
  EXPECT_VALUES(as_strided(m, {2, 2}, {1, 3}, 1), 1, 4, 2, 5);
  expect_error<ValueError>([&] { as_strided(m, {3, 3}, {3, 1}, 2); }, {"as_strided", "storage holds 9"});
}

TEST(Views, ChunkSplitUnbind) {
  Tensor x = arange(10);
  auto c = chunk(x, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].numel(), 2);
  auto s = split(x, 4);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_VALUES(s[2], 8, 9);
  auto w = split_with_sizes(x, {1, 9});
  EXPECT_EQ(w[1].numel(), 9);
  expect_error<ValueError>([&] { split_with_sizes(x, {1, 2}); }, {"sum to 3", "size 10"});
  auto u = unbind(x.view({2, 5}), 1);
  ASSERT_EQ(u.size(), 5u);
  EXPECT_VALUES(u[4], 4, 9);
}

TEST(Copy, AnyStridesAnyDTypesWithBroadcast) {
  Tensor dst = zeros({3, 4}, DType::Float64);
  Tensor src = arange(4, DType::Int32);
  copy_(dst, src);  // broadcast a row
  EXPECT_VALUES(dst.select(0, 2), 0, 1, 2, 3);
  Tensor tdst = zeros({4, 3}, DType::Float16).t();  // non-contiguous destination
  copy_(tdst, arange(12).view({3, 4}));
  EXPECT_VALUES(tdst, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
  expect_error<ValueError>([&] { copy_(dst, zeros({2})); }, {"copy_", "[2]", "[3, 4]"});
  // Overlapping copy reads from a snapshot.
  Tensor m = arange(4, DType::Float32).view({2, 2});
  Tensor mt = m.t();
  copy_(m, mt);
  EXPECT_VALUES(m, 0, 2, 1, 3);
}

// Copies within one dtype between layouts go row by row as raw elements (copy_kernel.cc's copy_rows):
// every element size, permuted and transposed sources and destinations, a broadcast source (stride 0), and a
// tensor big enough to be split between threads, against the values read through a cast (the other path).
TEST(Copy, OneDTypeBetweenLayoutsKeepsEveryElement) {
  for (DType dt : {DType::Bool, DType::UInt8, DType::Int8, DType::Int32, DType::Int64, DType::Float16,
                   DType::BFloat16, DType::Float32, DType::Float64}) {
    Tensor base = remainder(arange(3 * 4 * 5 * 6, DType::Int64), dt == DType::Bool ? 2 : 97).to(dt).view({3, 4, 5, 6});
    Tensor src = base.permute({0, 2, 1, 3});
    Tensor dst = empty(src.sizes(), dt);
    copy_(dst, src);
    EXPECT_EQ(values(dst), values(src)) << dtype_name(dt);
    Tensor tdst = empty({6, 4, 5, 3}, dt).permute({3, 2, 1, 0});  // a permuted destination
    copy_(tdst, src);
    EXPECT_EQ(values(tdst), values(src)) << dtype_name(dt);
    Tensor row = base.select(0, 1).select(0, 2).select(0, 3);  // [6]
    Tensor wide = empty({4, 6, 5}, dt).transpose(1, 2);          // [4, 5, 6], rows read again and again
    copy_(wide, row);
    EXPECT_EQ(values(wide.select(0, 3).select(0, 4)), values(row)) << dtype_name(dt);
  }
  Tensor big = randn({8, 64, 4, 32});
  Tensor heads = big.permute({0, 2, 1, 3}).contiguous();
  EXPECT_EQ(values(heads), values(big.permute({0, 2, 1, 3})));
  EXPECT_EQ(values(heads.permute({0, 2, 1, 3}).contiguous()), values(big));
}

// Transposing copies (the destination dense along a dim the source strides over) go in tiles, 4-byte
// elements 8x8 through registers (copy_kernel.cc's copy_tiles): sizes that leave ragged tiles and blocks,
// dims around the transposed pair, a source that is a slice (not at its storage's start, rows longer than
// the tile), a strided destination, and every element size, against the values read through a cast. Also a
// column expanded along rows (copy_rows writes its one value along each row).
TEST(Copy, TransposingCopiesKeepEveryElement) {
  for (DType dt : {DType::UInt8, DType::Float16, DType::Float32, DType::Int32, DType::Float64}) {
    auto counting = [&](IntList shape) {
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      return remainder(arange(n, DType::Int64), 251).to(dt).view(shape);
    };
    for (IntList shape : {IntList{8, 8}, IntList{37, 45}, IntList{64, 100}, IntList{300, 9}}) {
      Tensor src = counting(shape).t();
      EXPECT_EQ(values(src.contiguous()), values(src)) << dtype_name(dt) << " " << src.shape_str();
    }
    Tensor nhwc = counting({2, 19, 9, 70}).permute({0, 3, 1, 2});  // channels-last to NCHW
    EXPECT_EQ(values(nhwc.contiguous()), values(nhwc)) << dtype_name(dt);
    Tensor nchw = counting({3, 33, 5, 17}).permute({0, 2, 3, 1});
    EXPECT_EQ(values(nchw.contiguous()), values(nchw)) << dtype_name(dt);
    Tensor sliced = counting({50, 90}).narrow(0, 3, 41).narrow(1, 5, 77).t();
    EXPECT_EQ(values(sliced.contiguous()), values(sliced)) << dtype_name(dt);
    Tensor dst = empty({77, 100}, dt).narrow(1, 10, 41);  // rows 100 apart
    copy_(dst, sliced);
    EXPECT_EQ(values(dst), values(sliced)) << dtype_name(dt);
    Tensor column = counting({37, 3}).narrow(1, 1, 1).expand({37, 50});  // one value along each row (stride 0)
    EXPECT_EQ(values(column.contiguous()), values(column)) << dtype_name(dt);
  }
  Tensor big = randn({1024, 1024});  // split between threads
  EXPECT_EQ(values(big.t().contiguous()), values(big.t()));
}

TEST(Copy, ContiguousCloneTo) {
  Tensor x = arange(6, DType::Float32).view({2, 3}).t();
  Tensor c = x.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_VALUES(c, 0, 3, 1, 4, 2, 5);
  Tensor y = arange(3);
  EXPECT_EQ(y.contiguous().data_ptr(), y.data_ptr());
  EXPECT_NE(y.clone().data_ptr(), y.data_ptr());
  EXPECT_EQ(y.to(DType::Int64).data_ptr(), y.data_ptr());
}

TEST(Views, ZeroSizeDims) {
  Tensor x = zeros({0, 3});
  EXPECT_EQ(x.numel(), 0);
  EXPECT_EQ(x.view({3, 0}).sizes(), (IntList{3, 0}));
  EXPECT_EQ(x.t().contiguous().sizes(), (IntList{3, 0}));
  EXPECT_EQ(x.reshape({0, 3, 1}).sizes(), (IntList{0, 3, 1}));
  expect_error<ValueError>([&] { x.reshape({0, -1}); }, {"reshape"});  // -1 is ambiguous with 0 elements
  EXPECT_EQ(sum(x, {0}).sizes(), (IntList{3}));
  EXPECT_VALUES(sum(x, {0}), 0, 0, 0);
}

}  // namespace trainrun
