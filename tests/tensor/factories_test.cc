#include <cmath>

#include "tensor/allocator.h"
#include "tests/tensor/test_util.h"

namespace trainrun {

TEST(Factories, FullArangeLinspaceEye) {
  EXPECT_EQ(full({2}, 3).dtype(), DType::Int64);
  EXPECT_EQ(full({2}, 3.5).dtype(), DType::Float32);
  EXPECT_EQ(full({2}, true).dtype(), DType::Bool);
  EXPECT_VALUES(arange(1, 10, 3), 1, 4, 7);
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_VALUES(arange(0, 1, 0.25), 0, 0.25, 0.5, 0.75);
  EXPECT_VALUES(arange(5, 0, -2), 5, 3, 1);
  expect_error<ValueError>([] { arange(0, 5, -1); }, {"arange", "step"});
  EXPECT_VALUES(linspace(0, 1, 5), 0, 0.25, 0.5, 0.75, 1);
  EXPECT_VALUES(eye(2, 3), 1, 0, 0, 0, 1, 0);
  EXPECT_VALUES(ones_like(it({1, 2})), 1, 1);
  expect_error<ValueError>([] { empty({2, -1}); }, {"negative", "-1"});
}

TEST(Random, SeededAndIndependentOfThreadCount) {
  set_num_threads(1);
  manual_seed(42);
  Tensor a = randn({100000});
  set_num_threads(2);
  manual_seed(42);
  Tensor b = randn({100000});
  EXPECT_EQ(values(a), values(b));
  Tensor c = randn({100000});
  EXPECT_NE(values(a), values(c));  // the generator advanced
  Generator g(7);
  Tensor d = rand({1000}, {}, &g);
  Generator g2(7);
  EXPECT_EQ(values(d), values(rand({1000}, {}, &g2)));
}

TEST(Random, DistributionsHaveTheRightMoments) {
  manual_seed(3);
  Tensor n = randn({200000}, DType::Float64);
  EXPECT_NEAR(mean(n).item<double>(), 0, 0.01);
  EXPECT_NEAR(std(n).item<double>(), 1, 0.01);
  Tensor u = rand({200000});
  EXPECT_NEAR(mean(u).item<double>(), 0.5, 0.01);
  EXPECT_GE(min(u).item<double>(), 0);
  EXPECT_LT(max(u).item<double>(), 1);
  Tensor r = randint(-3, 4, {100000});
  EXPECT_EQ(min(r).item<int64_t>(), -3);
  EXPECT_EQ(max(r).item<int64_t>(), 3);
  Tensor m = empty({100000});
  normal_(m, 5, 2);
  EXPECT_NEAR(mean(m).item<double>(), 5, 0.05);
  Tensor bern = empty({100000});
  bernoulli_(bern, 0.3);
  EXPECT_NEAR(mean(bern).item<double>(), 0.3, 0.01);
  expect_error<ValueError>([] { randint(3, 3, {2}); }, {"randint", "low < high"});
  Tensor i = empty({2}, DType::Int64);
  expect_error<TypeError>([&] { uniform_(i); }, {"uniform_", "int64"});
}

TEST(Random, PhiloxKnownAnswer) {
  // Random123's published known-answer test for philox4x32-10, key and counter zero.
  auto r = philox4x32(0, 0, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(ThreadPool, ParallelForCoversRangeAndRethrows) {
  set_num_threads(2);
  std::vector<int> hits(100000, 0);
  parallel_for(0, 100000, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(parallel_for(0, 100000, 10, [](int64_t b, int64_t) {
                 if (b > 0) throw ValueError("boom");
               }),
               ValueError);
  expect_error<ValueError>([] { set_num_threads(0); }, {"set_num_threads"});
}

TEST(FromBlob, WrapsMemoryAndRunsDeleterOnce) {
  static int deleted = 0;
  float* data = new float[4]{1, 2, 3, 4};
  {
    Tensor t = from_blob(data, {2, 2}, {2, 1}, DType::Float32, [](void* p) { delete[] static_cast<float*>(p); ++deleted; });
    Tensor v = t.t();
    t = Tensor();
    EXPECT_VALUES(v, 1, 3, 2, 4);
    EXPECT_EQ(deleted, 0);
  }
  EXPECT_EQ(deleted, 1);
}

// Blocks of 32 MiB and more come from the huge-page path: 2 MiB aligned,
// fully usable up to the last byte, and unmapped when the last view dies.
TEST(Factories, LargeAllocationsAreHugePageAligned) {
  const int64_t n = (int64_t(32) << 20) / 4 + 3;  // just over the threshold, not a multiple of 2 MiB
  Tensor big = full({n}, 1.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data_ptr()) % (uintptr_t(2) << 20), 0u);
  Tensor tail = big.narrow(0, n - 3, 3);
  tail.fill_(2.0f);
  big = Tensor();  // the view keeps the storage alive
  EXPECT_VALUES(tail, 2, 2, 2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(empty({1000}).data_ptr()) % 64, 0u);
}

TEST(Factories, ZerosAndOnesDefaultToTheFloatDtype) {
  EXPECT_EQ(zeros({2}).dtype(), DType::Float32);
  EXPECT_EQ(ones({2}).dtype(), DType::Float32);
  EXPECT_EQ(ones({2}, DType::Int64).dtype(), DType::Int64);
  EXPECT_EQ(full({2}, 1).dtype(), DType::Int64);  // full infers from the value, as torch.full does
}

// Freed blocks of 16 KiB and more are reused for the same size, so a
// training step does not fault its temporaries in again every time.
TEST(Factories, LargeFreedBlocksAreReused) {
  for (int64_t kib : {16, 120, 128, 512, 1000}) {  // (glibc would map them, or trim its heap under them)
    void* block = nullptr;
    size_t cached = 0;
    {
      Tensor t = empty({kib * 1024 / 4});
      block = t.data_ptr();
      EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
      cached = cpu_memory_stats().cached_bytes;
    }
    EXPECT_GE(cpu_memory_stats().cached_bytes, cached + kib * 1024) << kib << " KiB: kept, not given to glibc";
    Tensor t = empty({kib * 1024 / 4});
    EXPECT_EQ(t.data_ptr(), block) << kib << " KiB";
  }
  {
    void* block = nullptr;
    {
      Tensor t = empty({500 * 1024 / 4});
      block = t.data_ptr();
    }
    Tensor t = empty({510 * 1024 / 4});  // rounded up to 16 KiB, as 500 KiB was: 512 KiB
    EXPECT_EQ(t.data_ptr(), block);
  }
  {
    void* block = nullptr;
    {
      Tensor t = empty({117 * 1024 / 4});
      block = t.data_ptr();
    }
    Tensor t = empty({120 * 1024 / 4 - 7});  // rounded up to 4 KiB below 128 KiB, as 117 KiB was: 120 KiB
    EXPECT_EQ(t.data_ptr(), block);
  }
  void* first = nullptr;
  {
    Tensor t = empty({(int64_t(3) << 20) / 4});  // 3 MiB
    first = t.data_ptr();
  }
  Tensor again = empty({(int64_t(3) << 20) / 4});
  EXPECT_EQ(again.data_ptr(), first);
  Tensor other = empty({(int64_t(5) << 20) / 4});  // another size gets another block
  EXPECT_NE(other.data_ptr(), first);
  again = Tensor();
  cpu_empty_cache();
  Tensor fresh = ones({(int64_t(3) << 20) / 4});
  EXPECT_EQ(sum(fresh).item<double>(), double((int64_t(3) << 20) / 4));
}

}  // namespace trainrun
