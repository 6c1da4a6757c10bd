#include "tensor/shared_memory.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/error.h"

namespace trainrun {
namespace {

// Blocks up to kArenaBlockMax bytes are packed into arenas of kArenaBytes;
// larger ones get a segment of their own, freed as soon as the last process
// drops it.
constexpr size_t kArenaBytes = size_t{16} << 20;
constexpr size_t kArenaBlockMax = size_t{1} << 20;
constexpr size_t kAlign = 64;
constexpr unsigned kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// Every segment this process maps, by inode, so a segment that arrives twice
// (or comes back to the process that made it) is mapped once. Weak: the
// storages on a segment own it.
struct Registry {
  std::mutex mu;
  std::unordered_map<uint64_t, std::weak_ptr<SharedSegment>> by_inode;
  size_t bytes = 0;
  std::shared_ptr<SharedSegment> arena;  // the arena small blocks come from now
  size_t arena_used = 0;
};

Registry& registry();

// The child must not go on filling the parent's arena: both would hand out
// the same free offsets of one shared segment. It starts its own.
void after_fork_in_child() {
  Registry& r = registry();
  std::shared_ptr<SharedSegment> inherited = std::move(r.arena);
  r.arena_used = 0;
  r.mu.unlock();
  inherited.reset();  // may unmap it (its destructor takes the lock)
}

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: storages may outlive static destruction
    // A fork while another thread holds the lock would leave the child's copy
    // locked forever: hold it across fork() instead.
    pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); }, after_fork_in_child);
    return reg;
  }();
  return *r;
}

[[noreturn]] void throw_errno(const char* what, size_t bytes) {
  const int err = errno;
  throw Error(fmt::format("shared memory: {} ({} bytes) failed: {}{}", what, bytes, std::strerror(err),
                          err == ENOMEM || err == ENOSPC ? " (out of memory for shared segments)" : ""));
}

uint64_t inode_of(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) throw_errno("fstat of a segment", 0);
  return static_cast<uint64_t>(st.st_ino);
}

// Maps `fd` (owned from here on) and registers it. Caller holds the lock.
std::shared_ptr<SharedSegment> map_locked(Registry& r, int fd, size_t bytes, uint64_t inode) {
  void* base = bytes == 0 ? nullptr : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    errno = err;
    throw_errno("mmap of a segment", bytes);
  }
  auto segment = std::make_shared<SharedSegment>(fd, base, bytes, inode);
  r.by_inode[inode] = segment;
  r.bytes += bytes;
  return segment;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

std::shared_ptr<SharedSegment> create_segment_locked(Registry& r, size_t bytes, bool populate = false) {
  const int fd = memfd_create("trainrun-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw_errno("memfd_create", bytes);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fcntl(fd, F_ADD_SEALS, kRequiredSeals) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    throw_errno("sizing and sealing a segment", bytes);
  }
  auto segment = map_locked(r, fd, bytes, inode_of(fd));
  // A segment about to be filled whole: allocate its pages in one call
  // instead of one fault per 4 KiB during the copy (about 40% of the time
  // of sharing a 256 MiB tensor here). Older kernels refuse it; the copy
  // then faults the pages in as before.
  if (populate && bytes > 0) (void)madvise(segment->base(), bytes, MADV_POPULATE_WRITE);
  return segment;
}

// A block of `bytes` in shared memory: in the current arena when small,
// else in a segment of its own. Caller holds the lock.
// A retired arena is handed back in `retired` so the caller drops it after
// unlocking (its destructor takes the lock).
std::pair<std::shared_ptr<SharedSegment>, size_t> allocate_block_locked(Registry& r, size_t bytes,
                                                                        std::shared_ptr<SharedSegment>& retired) {
  if (bytes > kArenaBlockMax) return {create_segment_locked(r, bytes, /*populate=*/true), 0};
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (!r.arena || r.arena_used + rounded > r.arena->bytes()) {
    // The old arena is never reused: another process may still read its
    // blocks. It is freed when the last storage on it, anywhere, is gone.
    retired = std::move(r.arena);
    r.arena = create_segment_locked(r, kArenaBytes);
    r.arena_used = 0;
  }
  const size_t offset = r.arena_used;
  r.arena_used += rounded;
  return {r.arena, offset};
}

DataPtr block_data(const std::shared_ptr<SharedSegment>& segment, size_t offset) {
  // The DataPtr owns a reference: the segment stays mapped while any storage on it lives.
  return DataPtr(segment->base() + offset, [keep = segment](void*) mutable { keep.reset(); },
                 Device(DeviceType::CPU));
}

}  // namespace

SharedSegment::~SharedSegment() {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_inode.find(inode_);
    // A newer segment may reuse the inode number once this one is unmapped:
    // only forget the entry if it is still ours (expired).
    if (it != r.by_inode.end() && it->second.expired()) r.by_inode.erase(it);
    r.bytes -= bytes_;
  }
  if (base_ != nullptr) munmap(base_, bytes_);
  close(fd_);
}

void share_storage(StorageImpl& storage) {
  if (storage.shared_segment() != nullptr) return;
  TR_CHECK(storage.device().is_cpu(), TypeError,
           "share_memory_: only CPU storages move to shared memory here (got one on {}); CUDA tensors are "
           "shared through CUDA IPC", storage.device().str());
  const size_t n = storage.nbytes();
  Registry& r = registry();
  std::pair<std::shared_ptr<SharedSegment>, size_t> block;
  std::shared_ptr<SharedSegment> retired;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    block = allocate_block_locked(r, n, retired);
  }
  char* dst = block.first->base() + block.second;
  if (n > 0) std::memcpy(dst, storage.data(), n);
  storage.set_shared(block_data(block.first, block.second), block.first, block.second);
}

Storage storage_from_shared_fd(int fd, size_t offset, size_t nbytes) {
  struct stat st;
  if (fstat(fd, &st) != 0) throw_errno("fstat of a received segment", nbytes);
  const int seals = fcntl(fd, F_GET_SEALS);
  TR_CHECK(seals >= 0 && (static_cast<unsigned>(seals) & (F_SEAL_SHRINK | F_SEAL_GROW)) ==
                             (F_SEAL_SHRINK | F_SEAL_GROW),
           ValueError, "shared memory: the received segment's size is not sealed (seals {:#x}); refusing to map a "
           "segment its sender could shrink under this process", seals);
  const auto size = static_cast<size_t>(st.st_size);
  TR_CHECK(offset <= size && nbytes <= size - offset, ValueError,
           "shared memory: a block of {} bytes at offset {} does not fit the received segment of {} bytes", nbytes,
           offset, size);
  const auto inode = static_cast<uint64_t>(st.st_ino);
  Registry& r = registry();
  std::shared_ptr<SharedSegment> segment;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_inode.find(inode);
    if (it != r.by_inode.end()) segment = it->second.lock();
    if (!segment) {
      const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (own < 0) throw_errno("dup of a received segment", size);
      segment = map_locked(r, own, size, inode);
    }
  }
  Storage storage = Storage::make(DataPtr(), nbytes);
  storage->set_shared(block_data(segment, offset), segment, offset);
  return storage;
}

SharedMemoryStats shared_memory_stats() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  SharedMemoryStats stats;
  for (const auto& [inode, weak] : r.by_inode) {
    if (!weak.expired()) ++stats.segments;
  }
  stats.bytes = r.bytes;
  return stats;
}

}  // namespace trainrun
