#pragma once
// The caching allocator behind CUDA tensors, written against an abstract
// device so that its logic is tested on the CPU (tests/tensor/cuda/ use a fake
// device memory). Like PyTorch's:
//  - sizes round up to 512 bytes; requests of at most 1 MiB come from 2 MiB
//    segments (the small pool), larger ones from 20 MiB segments (up to
//    10 MiB) or segments rounded up to 2 MiB (the large pool);
//  - a free block is reused only by the stream it was allocated on: work on
//    that stream is ordered, so it may be reused at once, without a sync;
//  - a cached block bigger than asked is split, and freed neighbours within a
//    segment coalesce again;
//  - record_stream(p, s) marks a block used by another stream: its free is
//    deferred until an event recorded on s at free time has completed;
//  - when the device refuses an allocation, cached segments are returned and
//    the allocation retried once; failing that, OutOfMemoryError names the
//    request and the allocator's statistics.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace trainrun::cuda {

// A stream within the process (Stream::id()); 0 is the default stream.
using StreamId = uintptr_t;

// What the caching allocator needs from one device.
class DeviceMemoryBackend {
 public:
  virtual ~DeviceMemoryBackend() = default;
  // A new segment; nullptr when the device has no room for it.
  virtual void* malloc(size_t size) = 0;
  virtual void free(void* ptr) = 0;
  // An event recorded now on `stream`, polled with event_done.
  virtual void* record_event(StreamId stream) = 0;
  virtual bool event_done(void* event) = 0;
  virtual void destroy_event(void* event) = 0;
  // Waits for all work on the device (before segments go back to it).
  virtual void synchronize() = 0;
  // Free and total bytes of the device, for the out-of-memory message.
  virtual std::pair<size_t, size_t> memory_info() = 0;
};

struct MemoryStats {
  size_t allocated_bytes = 0;       // in blocks handed out (rounded sizes)
  size_t peak_allocated_bytes = 0;
  size_t requested_bytes = 0;       // what callers asked for
  size_t reserved_bytes = 0;        // in segments taken from the device
  size_t peak_reserved_bytes = 0;
  int64_t active_blocks = 0;        // handed out, or waiting on another stream
  int64_t cached_blocks = 0;        // free, in the pools
  int64_t segments = 0;
  int64_t num_device_allocs = 0;    // calls to the device's malloc (cudaMalloc)
  int64_t num_device_frees = 0;
  int64_t num_alloc_retries = 0;    // allocations that freed the cache and retried
  int64_t num_ooms = 0;
};

class CachingAllocator {
 public:
  static constexpr size_t kMinBlockSize = 512;
  static constexpr size_t kSmallSize = size_t(1) << 20;      // largest request of the small pool
  static constexpr size_t kSmallBuffer = size_t(2) << 20;    // segment size of the small pool
  static constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // below this, large requests share...
  static constexpr size_t kLargeBuffer = size_t(20) << 20;   // ...20 MiB segments
  static constexpr size_t kRoundLarge = size_t(2) << 20;

  // `device_name` ("cuda:0") goes into error messages.
  CachingAllocator(std::unique_ptr<DeviceMemoryBackend> backend, std::string device_name);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `size` bytes for use on `stream`; nullptr for size 0.
  void* allocate(size_t size, StreamId stream);
  // Returns a block; deferred while streams recorded on it are still busy.
  void free(void* ptr);
  // Marks ptr's block as used by `stream` (a tensor handed to another stream);
  // memory this allocator did not hand out is left alone.
  void record_stream(void* ptr, StreamId stream);
  // Sharing with other processes (CUDA IPC). The device allocation (segment)
  // that holds ptr's block, as {base, bytes}: a consumer opens the
  // allocation and finds the block at ptr - base.
  std::pair<void*, size_t> segment_of(void* ptr) const;
  // A lease on ptr's block, taken for another process: while any is held,
  // the block's free (its tensor dying here) does not return it to the pool,
  // and it counts as allocated until the last lease is released.
  void hold(void* ptr);
  void release_hold(void* ptr);
  // Blocks freed here but still leased to other processes.
  size_t leased_blocks() const;
  // Returns every wholly free segment to the device.
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak_stats();
  // The rounded size of the block at ptr (0 when ptr is not handed out).
  size_t block_size(void* ptr) const;

  // The size a request is rounded to, and the segment size it would get.
  static size_t round_size(size_t size);
  static size_t segment_size(size_t rounded);

 private:
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;

  Block* find_free_block(Pool& pool, size_t size, StreamId stream);
  Block* new_segment(Pool& pool, size_t size, StreamId stream, size_t requested);
  void release_cached_segments();
  void finish_free(Block* block);
  void free_block(Block* block);
  void process_events();
  [[noreturn]] void throw_out_of_memory(size_t requested, size_t segment);

  std::unique_ptr<DeviceMemoryBackend> backend_;
  std::string device_name_;
  mutable std::mutex mu_;
  Pool small_pool_, large_pool_;
  std::unordered_map<void*, Block*> active_;
  std::unordered_map<void*, Block*> freed_while_held_;  // freed by their tensors, still leased elsewhere
  // Blocks freed while other streams used them, with one event per stream.
  std::deque<std::pair<void*, Block*>> pending_events_;
  MemoryStats stats_;
};

}  // namespace trainrun::cuda
