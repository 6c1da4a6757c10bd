#include "tensor/cuda/caching_allocator.h"

#include <vector>

#include "base/error.h"

namespace trainrun::cuda {

struct CachingAllocator::Block {
  char* ptr;
  size_t size;
  StreamId stream;
  Pool* pool;
  size_t requested = 0;
  bool allocated = false;  // handed out, or freed but waiting on other streams
  Block* prev = nullptr;   // neighbours within the segment
  Block* next = nullptr;
  std::set<StreamId> stream_uses;
  int pending_events = 0;
  int holds = 0;  // leases of other processes (CUDA IPC)

  // Takes over the right neighbour (free, out of its pool) and deletes it.
  void absorb_next() {
    Block* right = next;
    size += right->size;
    next = right->next;
    if (next != nullptr) next->prev = this;
    delete right;
  }
};

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

namespace {

std::string format_bytes(size_t n) {
  if (n >= (size_t(1) << 30)) return fmt::format("{:.2f} GiB", n / double(size_t(1) << 30));
  if (n >= (size_t(1) << 20)) return fmt::format("{:.2f} MiB", n / double(size_t(1) << 20));
  if (n >= 1024) return fmt::format("{:.2f} KiB", n / 1024.0);
  return fmt::format("{} bytes", n);
}

}  // namespace

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceMemoryBackend> backend, std::string device_name)
    : backend_(std::move(backend)), device_name_(std::move(device_name)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [event, block] : pending_events_) backend_->destroy_event(event);
  // Segments that are wholly free go back; blocks still handed out are the
  // owner's bug and their segments are left to the process's end.
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (Block* b : *pool) {
      if (b->prev == nullptr && b->next == nullptr) backend_->free(b->ptr);
      delete b;
    }
    pool->clear();
  }
}

size_t CachingAllocator::round_size(size_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

void* CachingAllocator::allocate(size_t size, StreamId stream) {
  if (size == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  process_events();
  const size_t rounded = round_size(size);
  Pool& pool = rounded <= kSmallSize ? small_pool_ : large_pool_;
  Block* block = find_free_block(pool, rounded, stream);
  if (block != nullptr) {
    pool.erase(block);
  } else {
    block = new_segment(pool, rounded, stream, size);
  }
  // Split off the rest when it is worth keeping as a block of its own.
  const size_t remaining = block->size - rounded;
  const bool split = &pool == &small_pool_ ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    Block* rest = new Block{block->ptr + rounded, remaining, stream, &pool};
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = rounded;
    pool.insert(rest);
  }
  block->allocated = true;
  block->requested = size;
  active_[block->ptr] = block;
  stats_.allocated_bytes += block->size;
  stats_.requested_bytes += size;
  stats_.active_blocks += 1;
  if (stats_.allocated_bytes > stats_.peak_allocated_bytes) stats_.peak_allocated_bytes = stats_.allocated_bytes;
  return block->ptr;
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, size_t size, StreamId stream) {
  Block key{nullptr, size, stream, &pool};
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  return *it;
}

CachingAllocator::Block* CachingAllocator::new_segment(Pool& pool, size_t size, StreamId stream, size_t requested) {
  const size_t seg = segment_size(size);
  void* p = backend_->malloc(seg);
  if (p == nullptr) {
    // The cache may hold the memory this needs: give it back and try again.
    stats_.num_alloc_retries += 1;
    release_cached_segments();
    p = backend_->malloc(seg);
  }
  if (p == nullptr) {
    stats_.num_ooms += 1;
    throw_out_of_memory(requested, seg);
  }
  stats_.num_device_allocs += 1;
  stats_.segments += 1;
  stats_.reserved_bytes += seg;
  if (stats_.reserved_bytes > stats_.peak_reserved_bytes) stats_.peak_reserved_bytes = stats_.reserved_bytes;
  return new Block{static_cast<char*>(p), seg, stream, &pool};
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  TR_CHECK(it != active_.end(), ValueError,
           "CUDA caching allocator ({}): free of {} which it did not hand out, or which was freed already", device_name_,
           ptr);
  Block* block = it->second;
  active_.erase(it);
  if (block->holds > 0) {  // another process still uses it: freed when its last lease goes
    freed_while_held_[ptr] = block;
    return;
  }
  finish_free(block);
}

void CachingAllocator::finish_free(Block* block) {
  stats_.allocated_bytes -= block->size;
  stats_.requested_bytes -= block->requested;
  if (!block->stream_uses.empty()) {
    // Other streams may still read or write it: reuse waits for their work
    // queued so far.
    for (StreamId s : block->stream_uses) {
      pending_events_.emplace_back(backend_->record_event(s), block);
      block->pending_events += 1;
    }
    block->stream_uses.clear();
    return;
  }
  free_block(block);
}

void CachingAllocator::free_block(Block* block) {
  block->allocated = false;
  block->requested = 0;
  stats_.active_blocks -= 1;
  Pool& pool = *block->pool;
  // Coalesce with free neighbours, which leave the pool as they merge.
  if (block->prev != nullptr && !block->prev->allocated) {
    Block* prev = block->prev;
    pool.erase(prev);
    prev->absorb_next();
    block = prev;
  }
  if (block->next != nullptr && !block->next->allocated) {
    pool.erase(block->next);
    block->absorb_next();
  }
  pool.insert(block);
}

void CachingAllocator::process_events() {
  while (!pending_events_.empty()) {
    auto [event, block] = pending_events_.front();
    if (!backend_->event_done(event)) break;
    backend_->destroy_event(event);
    pending_events_.pop_front();
    if (--block->pending_events == 0) free_block(block);
  }
}

void CachingAllocator::release_cached_segments() {
  // Frees waiting on other streams complete once the device is idle.
  backend_->synchronize();
  process_events();
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr) {
        ++it;
        continue;
      }
      backend_->free(b->ptr);
      stats_.num_device_frees += 1;
      stats_.segments -= 1;
      stats_.reserved_bytes -= b->size;
      it = pool->erase(it);
      delete b;
    }
  }
}

std::pair<void*, size_t> CachingAllocator::segment_of(void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  TR_CHECK(it != active_.end(), ValueError, "CUDA caching allocator ({}): {} is not a block it handed out",
           device_name_, ptr);
  const Block* head = it->second;
  while (head->prev != nullptr) head = head->prev;
  size_t bytes = 0;
  for (const Block* b = head; b != nullptr; b = b->next) bytes += b->size;
  return {head->ptr, bytes};
}

void CachingAllocator::hold(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  TR_CHECK(it != active_.end(), ValueError,
           "CUDA caching allocator ({}): a lease on {}, which is not a live block it handed out", device_name_, ptr);
  it->second->holds += 1;
}

void CachingAllocator::release_hold(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = active_.find(ptr); it != active_.end()) {
    TR_CHECK(it->second->holds > 0, ValueError, "CUDA caching allocator ({}): release of {}, which has no lease",
             device_name_, ptr);
    it->second->holds -= 1;
    return;
  }
  auto it = freed_while_held_.find(ptr);
  TR_CHECK(it != freed_while_held_.end(), ValueError,
           "CUDA caching allocator ({}): release of {}, which has no lease", device_name_, ptr);
  Block* block = it->second;
  if (--block->holds > 0) return;
  freed_while_held_.erase(it);
  finish_free(block);
}

size_t CachingAllocator::leased_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return freed_while_held_.size();
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  // Memory from elsewhere (DLPack, IPC) follows its owner's rules, as in PyTorch.
  if (it == active_.end()) return;
  if (stream != it->second->stream) it->second->stream_uses.insert(stream);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_segments();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats s = stats_;
  s.cached_blocks = static_cast<int64_t>(small_pool_.size() + large_pool_.size());
  return s;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

size_t CachingAllocator::block_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  return it == active_.end() ? 0 : it->second->size;
}

void CachingAllocator::throw_out_of_memory(size_t requested, size_t segment) {
  auto [free_bytes, total_bytes] = backend_->memory_info();
  size_t cached = 0;
  for (const Pool* pool : {&small_pool_, &large_pool_})
    for (const Block* b : *pool) cached += b->size;
  throw OutOfMemoryError(fmt::format(
      "CUDA out of memory on {}: tried to allocate {} (a new segment of {}). The device has {} in total, {} free. "
      "trainrun has {} reserved: {} allocated to tensors (peak {}), {} cached in free blocks of split segments; "
      "{} cudaMalloc calls so far. Free tensors you no longer need or lower the batch size; empty_cache() returns "
      "the cache to the device, and other processes on this GPU may hold the rest.",
      device_name_, format_bytes(requested), format_bytes(segment), format_bytes(total_bytes), format_bytes(free_bytes),
      format_bytes(stats_.reserved_bytes), format_bytes(stats_.allocated_bytes),
      format_bytes(stats_.peak_allocated_bytes), format_bytes(cached), stats_.num_device_allocs));
}

}  // namespace trainrun::cuda
