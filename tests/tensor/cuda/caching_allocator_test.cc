// The caching allocator's logic against a fake device memory: rounding and
// pools, reuse per stream, splitting and coalescing, record_stream, the
// out-of-memory retry and message, statistics, and concurrent use. Runs on any
// machine: nothing here touches a GPU.
#include "tensor/cuda/caching_allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tests/expect_error.h"

namespace trainrun::cuda {
namespace {

constexpr size_t MiB = size_t(1) << 20;

// Device memory as an address counter with a capacity; memory is never
// touched. Streams complete work only when the test says so.
struct FakeDevice {
  size_t capacity;
  size_t used = 0;
  uintptr_t next_address = 0x100000000;
  std::map<void*, size_t> segments;
  std::map<StreamId, uint64_t> submitted, completed;
  int mallocs = 0, frees = 0, syncs = 0, events_live = 0;
  void complete(StreamId s) { completed[s] = submitted[s]; }
};

struct FakeEvent {
  StreamId stream;
  uint64_t ticket;
};

class FakeBackend final : public DeviceMemoryBackend {
 public:
  explicit FakeBackend(FakeDevice* dev) : dev_(dev) {}
  void* malloc(size_t size) override {
    if (dev_->used + size > dev_->capacity) return nullptr;
    void* p = reinterpret_cast<void*>(dev_->next_address);
    dev_->next_address += size + 4096;
    dev_->used += size;
    dev_->segments[p] = size;
    dev_->mallocs += 1;
    return p;
  }
  void free(void* ptr) override {
    auto it = dev_->segments.find(ptr);
    ASSERT_NE(it, dev_->segments.end()) << "freed a pointer that is not a segment";
    dev_->used -= it->second;
    dev_->segments.erase(it);
    dev_->frees += 1;
  }
  void* record_event(StreamId stream) override {
    dev_->events_live += 1;
    return new FakeEvent{stream, ++dev_->submitted[stream]};
  }
  bool event_done(void* event) override {
    auto* e = static_cast<FakeEvent*>(event);
    return dev_->completed[e->stream] >= e->ticket;
  }
  void destroy_event(void* event) override {
    dev_->events_live -= 1;
    delete static_cast<FakeEvent*>(event);
  }
  void synchronize() override {
    dev_->syncs += 1;
    for (auto& [s, n] : dev_->submitted) dev_->completed[s] = n;
  }
  std::pair<size_t, size_t> memory_info() override { return {dev_->capacity - dev_->used, dev_->capacity}; }

 private:
  FakeDevice* dev_;
};

class CachingAllocatorTest : public ::testing::Test {
 protected:
  FakeDevice dev{size_t(1) << 40};
  CachingAllocator alloc{std::make_unique<FakeBackend>(&dev), "cuda:0"};
  char* at(void* p, size_t offset) { return static_cast<char*>(p) + offset; }
};

TEST(CachingAllocatorSizes, RoundingAndSegmentSizesFollowPyTorch) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(11 * MiB), 12 * MiB);
}

TEST_F(CachingAllocatorTest, ZeroBytesIsNullAndFreeingNullIsFine) {
  EXPECT_EQ(alloc.allocate(0, 0), nullptr);
  alloc.free(nullptr);
  EXPECT_EQ(dev.mallocs, 0);
}

TEST_F(CachingAllocatorTest, SmallRequestsShareOneTwoMiBSegment) {
  std::vector<void*> ps;
  for (int i = 0; i < 4; ++i) ps.push_back(alloc.allocate(512 * 1024, 0));
  EXPECT_EQ(dev.mallocs, 1);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(ps[i], at(ps[0], i * 512 * 1024));
  void* fifth = alloc.allocate(100, 0);
  EXPECT_EQ(dev.mallocs, 2);
  EXPECT_EQ(alloc.block_size(fifth), 512u);
  for (void* p : ps) alloc.free(p);
  alloc.free(fifth);
}

TEST_F(CachingAllocatorTest, FreedBlockIsReusedWithoutTheDevice) {
  void* a = alloc.allocate(3000, 0);
  alloc.free(a);
  void* b = alloc.allocate(2900, 0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(dev.mallocs, 1);
  alloc.free(b);
}

TEST_F(CachingAllocatorTest, LargeBlocksSplitAndCoalesce) {
  void* a = alloc.allocate(3 * MiB, 0);  // a 20 MiB segment, split
  void* b = alloc.allocate(3 * MiB, 0);
  EXPECT_EQ(dev.mallocs, 1);
  EXPECT_EQ(b, at(a, 3 * MiB));
  EXPECT_EQ(alloc.stats().cached_blocks, 1);  // the 14 MiB rest
  alloc.free(a);
  alloc.free(b);
  // a, b and the rest merged back into one 20 MiB block...
  EXPECT_EQ(alloc.stats().cached_blocks, 1);
  // ...so a request of the whole segment is served from it.
  void* whole = alloc.allocate(20 * MiB, 0);
  EXPECT_EQ(whole, a);
  EXPECT_EQ(dev.mallocs, 1);
  alloc.free(whole);
}

TEST_F(CachingAllocatorTest, SmallRemainderOfALargeBlockIsNotSplitOff) {
  void* p = alloc.allocate(11 * MiB, 0);  // 12 MiB segment; a 1 MiB rest is not worth a block
  EXPECT_EQ(alloc.block_size(p), 12 * MiB);
  EXPECT_EQ(alloc.stats().cached_blocks, 0);
  alloc.free(p);
}

TEST_F(CachingAllocatorTest, BlocksAreReusedOnlyByTheirStream) {
  const StreamId s1 = 0x1000, s2 = 0x2000;
  void* a = alloc.allocate(4096, s1);
  alloc.free(a);
  void* b = alloc.allocate(4096, s2);
  EXPECT_NE(a, b);
  EXPECT_EQ(dev.mallocs, 2);
  void* c = alloc.allocate(4096, s1);
  EXPECT_EQ(a, c);
  alloc.free(b);
  alloc.free(c);
}

TEST_F(CachingAllocatorTest, RecordStreamDefersReuseUntilThatStreamsWorkIsDone) {
  const StreamId s1 = 0x1000, s2 = 0x2000;
  void* a = alloc.allocate(8 * MiB, s1);
  alloc.record_stream(a, s2);
  alloc.free(a);
  EXPECT_EQ(dev.events_live, 1);
  EXPECT_EQ(alloc.stats().active_blocks, 1);  // still in use by s2's queued work
  void* b = alloc.allocate(8 * MiB, s1);
  EXPECT_NE(b, a);
  dev.complete(s2);
  void* c = alloc.allocate(8 * MiB, s1);
  EXPECT_EQ(c, a);
  EXPECT_EQ(dev.events_live, 0);
  alloc.free(b);
  alloc.free(c);
  EXPECT_EQ(alloc.stats().active_blocks, 0);
}

TEST_F(CachingAllocatorTest, RecordingTheAllocatingStreamAddsNoEvent) {
  void* a = alloc.allocate(4096, 7);
  alloc.record_stream(a, 7);
  alloc.free(a);
  EXPECT_EQ(dev.events_live, 0);
  EXPECT_EQ(alloc.allocate(4096, 7), a);
  alloc.free(a);
}

TEST_F(CachingAllocatorTest, StatisticsTrackAllocatedReservedAndPeaks) {
  void* a = alloc.allocate(1000, 0);
  void* b = alloc.allocate(12 * MiB, 0);
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 1024 + 12 * MiB);
  EXPECT_EQ(s.requested_bytes, 1000 + 12 * MiB);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB + 12 * MiB);
  EXPECT_EQ(s.segments, 2);
  EXPECT_EQ(s.num_device_allocs, 2);
  EXPECT_EQ(s.active_blocks, 2);
  alloc.free(b);
  s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.peak_allocated_bytes, 1024 + 12 * MiB);
  EXPECT_EQ(s.reserved_bytes, 14 * MiB);  // freed memory stays cached
  alloc.reset_peak_stats();
  EXPECT_EQ(alloc.stats().peak_allocated_bytes, 1024u);
  alloc.free(a);
}

TEST_F(CachingAllocatorTest, EmptyCacheReturnsOnlyWhollyFreeSegments) {
  void* live = alloc.allocate(4096, 0);  // keeps its 2 MiB segment
  void* gone = alloc.allocate(12 * MiB, 0);
  alloc.free(gone);
  alloc.empty_cache();
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(s.num_device_frees, 1);
  EXPECT_EQ(dev.segments.size(), 1u);
  alloc.free(live);
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved_bytes, 0u);
  EXPECT_TRUE(dev.segments.empty());
}

TEST(CachingAllocatorMemory, OutOfMemoryFreesTheCacheRetriesThenNamesTheNumbers) {
  FakeDevice dev{50 * MiB};
  CachingAllocator alloc(std::make_unique<FakeBackend>(&dev), "cuda:3");
  void* x = alloc.allocate(12 * MiB, 0);
  void* y = alloc.allocate(12 * MiB, 0);
  alloc.free(x);  // cached: 26 MiB free on the device, 12 more in the cache
  void* z = alloc.allocate(30 * MiB, 0);
  ASSERT_NE(z, nullptr);
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_device_frees, 1);
  EXPECT_EQ(dev.syncs, 1);  // the device idles before memory goes back to it
  expect_error<OutOfMemoryError>([&] { alloc.allocate(30 * MiB, 0); },
                                 {"CUDA out of memory on cuda:3", "tried to allocate 30.00 MiB", "50.00 MiB in total",
                                  "8.00 MiB free", "42.00 MiB reserved", "42.00 MiB allocated", "cudaMalloc calls"});
  EXPECT_EQ(alloc.stats().num_ooms, 1);
  // Still usable after the error.
  alloc.free(z);
  void* again = alloc.allocate(30 * MiB, 0);
  EXPECT_EQ(again, z);
  alloc.free(again);
  alloc.free(y);
}

TEST_F(CachingAllocatorTest, DoubleFreeIsNamed) {
  void* a = alloc.allocate(100, 0);
  alloc.free(a);
  expect_error<ValueError>([&] { alloc.free(a); }, {"cuda:0", "did not hand out", "freed already"});
}

TEST_F(CachingAllocatorTest, SegmentOfNamesTheAllocationAndTheBlocksPlaceInIt) {
  void* a = alloc.allocate(512 * 1024, 0);
  void* b = alloc.allocate(512 * 1024, 0);
  auto [base, bytes] = alloc.segment_of(b);
  EXPECT_EQ(base, a);
  EXPECT_EQ(bytes, 2 * MiB);
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(base), 512 * 1024);
  alloc.free(a);
  alloc.free(b);
  expect_error<ValueError>([&] { alloc.segment_of(b); }, {"cuda:0", "not a block it handed out"});
}

TEST_F(CachingAllocatorTest, ALeasedBlockFreedHereStaysAllocatedUntilTheLastLeaseGoes) {
  const size_t baseline = alloc.stats().allocated_bytes;
  void* p = alloc.allocate(4 * MiB, 0);
  alloc.hold(p);  // two consumers
  alloc.hold(p);
  alloc.free(p);  // the producer's tensor dies
  EXPECT_EQ(alloc.leased_blocks(), 1u);
  EXPECT_EQ(alloc.stats().allocated_bytes, baseline + 4 * MiB);
  void* q = alloc.allocate(4 * MiB, 0);
  EXPECT_NE(q, p) << "a block still leased to another process was handed out again";
  alloc.release_hold(p);
  EXPECT_EQ(alloc.leased_blocks(), 1u);
  alloc.release_hold(p);
  EXPECT_EQ(alloc.leased_blocks(), 0u);
  alloc.free(q);
  EXPECT_EQ(alloc.stats().allocated_bytes, baseline);
  EXPECT_EQ(alloc.allocate(4 * MiB, 0), p);  // back in the pool
  alloc.free(p);
  expect_error<ValueError>([&] { alloc.release_hold(p); }, {"cuda:0", "has no lease"});
}

TEST_F(CachingAllocatorTest, ALeaseReleasedWhileTheTensorLivesLeavesItsFreeAlone) {
  void* p = alloc.allocate(1000, 0);
  alloc.hold(p);
  alloc.release_hold(p);
  EXPECT_EQ(alloc.leased_blocks(), 0u);
  alloc.free(p);
  EXPECT_EQ(alloc.allocate(1000, 0), p);
  alloc.free(p);
  expect_error<ValueError>([&] { alloc.hold(p); }, {"cuda:0", "not a live block"});
}

TEST_F(CachingAllocatorTest, EmptyCacheKeepsASegmentWithALeasedBlock) {
  void* p = alloc.allocate(30 * MiB, 0);
  alloc.hold(p);
  alloc.free(p);
  alloc.empty_cache();
  EXPECT_EQ(dev.frees, 0) << "the allocation another process has open went back to the device";
  alloc.release_hold(p);
  alloc.empty_cache();
  EXPECT_EQ(dev.frees, 1);
}

TEST_F(CachingAllocatorTest, ConcurrentAllocationsKeepTheBooksBalanced) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      std::mt19937 rng(t);
      std::vector<void*> live;
      for (int i = 0; i < 5000; ++i) {
        if (live.size() < 16 && rng() % 3 != 0) {
          size_t size = rng() % 2 ? rng() % 8192 + 1 : (rng() % 24 + 1) * MiB;
          live.push_back(alloc.allocate(size, static_cast<StreamId>(t % 2)));
        } else if (!live.empty()) {
          size_t k = rng() % live.size();
          alloc.free(live[k]);
          live.erase(live.begin() + k);
        }
      }
      for (void* p : live) alloc.free(p);
    });
  }
  for (auto& th : threads) th.join();
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.active_blocks, 0);
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved_bytes, 0u);
  EXPECT_TRUE(dev.segments.empty());
}

}  // namespace
}  // namespace trainrun::cuda
