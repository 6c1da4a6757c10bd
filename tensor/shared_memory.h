#pragma once
// Shared memory for CPU tensors: Tensor.share_memory_() and tensors passed
// between processes (trainrun.multiprocessing, DataLoader workers).
//
// A segment is an anonymous memory file (memfd_create) whose size is sealed,
// mapped MAP_SHARED. It has no name in /dev/shm, so nothing can be left
// behind: the kernel frees it when the last process unmaps it and closes its
// descriptor, even after kill -9. Another process gets it as a file
// descriptor (SCM_RIGHTS over a Unix socket) and maps it once: segments are
// cached by inode, so a thousand tensors from one segment are one mapping.
//
// Small storages are packed into shared arenas (bump-allocated, never reused
// while any process may still read a block), so 100k shared tensors are a
// few descriptors and mappings, not 100k of each.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/storage.h"

namespace trainrun {

// One mapped segment in this process. Storages on it hold it alive.
class SharedSegment {
 public:
  SharedSegment(int fd, void* base, size_t bytes, uint64_t inode) : fd_(fd), base_(base), bytes_(bytes), inode_(inode) {}
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  // The segment's descriptor in this process: send it to share the segment.
  int fd() const { return fd_; }
  char* base() const { return static_cast<char*>(base_); }
  size_t bytes() const { return bytes_; }
  // The segment's identity, the same in every process that maps it.
  uint64_t inode() const { return inode_; }

 private:
  int fd_;
  void* base_;
  size_t bytes_;
  uint64_t inode_;
};

// Moves a CPU storage's bytes into shared memory in place: every tensor on
// the storage keeps its values and now reads and writes the shared copy.
// No-op when the storage is already shared.
void share_storage(StorageImpl& storage);

// A storage of `nbytes` at `offset` of the segment behind `fd`, a descriptor
// received from another process (the caller keeps and closes it). Checks
// that the segment's size is sealed and covers the block, so a shrinking
// sender cannot make this process fault.
Storage storage_from_shared_fd(int fd, size_t offset, size_t nbytes);

// What this process maps now: the leak report's and the tests' numbers.
struct SharedMemoryStats {
  size_t segments = 0;
  size_t bytes = 0;
};
SharedMemoryStats shared_memory_stats();

}  // namespace trainrun
