// Shared-memory storages: moving a storage in place, receiving a segment's
// descriptor in another process (SCM_RIGHTS), one mapping per segment,
// arenas for small blocks, lifetimes, refusals, and fork safety.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "tensor/shared_memory.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

// One byte of data with room for one descriptor in its control message.
struct OneByteMessage {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  OneByteMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
};

void send_fd(int sock, int fd) {
  OneByteMessage m;
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ASSERT_EQ(sendmsg(sock, &m.msg, 0), 1);
}

int receive_fd(int sock) {
  OneByteMessage m;
  if (recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC) != 1) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m.msg)), sizeof(int));
  return fd;
}

// Runs `child` in a forked process and returns its exit status (0: passed).
template <typename F>
int in_child(F child) {
  pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(SharedMemory, ShareStorageKeepsValuesAndViews) {
  Tensor t = arange(12, DType::Float32).view({3, 4});
  Tensor row = t.select(0, 1);
  share_storage(*t.impl()->storage());
  ASSERT_NE(t.impl()->storage()->shared_segment(), nullptr);
  EXPECT_VALUES(row, 4, 5, 6, 7);
  const void* before = t.data_ptr();
  share_storage(*t.impl()->storage());  // already shared: nothing moves
  EXPECT_EQ(t.data_ptr(), before);
  row.fill_(1.5);
  EXPECT_VALUES(t.select(0, 1), 1.5, 1.5, 1.5, 1.5);
}

TEST(SharedMemory, ForkedChildWritesAreSeenByTheParent) {
  Tensor t = zeros({1000});
  share_storage(*t.impl()->storage());
  ASSERT_EQ(in_child([&] {
              t.fill_(7.0);
              return 0;
            }),
            0);
  EXPECT_EQ(t.data<float>()[999], 7.0f);
}

TEST(SharedMemory, AForkedChildDoesNotAllocateFromTheParentsArena) {
  Tensor parents = zeros({4});
  share_storage(*parents.impl()->storage());  // the parent has an arena with free room now
  Tensor before_fork = ones({4});
  ASSERT_EQ(in_child([&] {
              Tensor childs = full({4}, 5.0);
              share_storage(*childs.impl()->storage());
              return childs.impl()->storage()->shared_segment() == parents.impl()->storage()->shared_segment() ? 1
                                                                                                            : 0;
            }),
            0);
  share_storage(*before_fork.impl()->storage());
  EXPECT_VALUES(before_fork, 1, 1, 1, 1);
  EXPECT_VALUES(parents, 0, 0, 0, 0);
}

TEST(SharedMemory, AReceivedDescriptorMapsTheSameBytesBothWays) {
  Tensor t = arange(4096, DType::Float32);
  Storage s = t.impl()->storage();
  share_storage(*s);
  const int segment_fd = s->shared_segment()->fd();
  const size_t offset = s->shared_offset();
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t pid = fork();
  if (pid == 0) {  // the receiver: a fresh view of the bytes, written back
    int fd = receive_fd(sv[1]);
    Storage got = storage_from_shared_fd(fd, offset, 4096 * sizeof(float));
    close(fd);
    float* p = static_cast<float*>(got->data());
    bool same = p[4095] == 4095.0f;
    p[0] = -1.0f;
    _exit(same ? 0 : 1);
  }
  send_fd(sv[0], segment_fd);
  int status = 0;
  waitpid(pid, &status, 0);
  close(sv[0]);
  close(sv[1]);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the receiver read wrong values";
  EXPECT_EQ(t.data<float>()[0], -1.0f);
}

TEST(SharedMemory, OneMappingPerSegmentAndArenasForSmallBlocks) {
  const SharedMemoryStats before = shared_memory_stats();
  std::vector<Tensor> small;
  for (int i = 0; i < 10000; ++i) {
    small.push_back(full({4}, static_cast<double>(i)));
    share_storage(*small.back().impl()->storage());
  }
  // 10000 blocks of 64 bytes fit one 16 MiB arena (two if one was half full).
  EXPECT_LE(shared_memory_stats().segments, before.segments + 2);
  // Receiving a block of a segment this process already maps maps nothing new.
  const Storage& s = small[123].impl()->storage();
  Storage again = storage_from_shared_fd(s->shared_segment()->fd(), s->shared_offset(), s->nbytes());
  EXPECT_EQ(again->data(), s->data());
  EXPECT_LE(shared_memory_stats().segments, before.segments + 2);
  EXPECT_EQ(static_cast<float*>(again->data())[3], 123.0f);
}

TEST(SharedMemory, ALargeSegmentIsUnmappedWithItsLastStorage) {
  const SharedMemoryStats before = shared_memory_stats();
  {
    Tensor big = zeros({1 << 20});  // 4 MiB: a segment of its own
    share_storage(*big.impl()->storage());
    EXPECT_EQ(shared_memory_stats().bytes, before.bytes + (4u << 20));
    Tensor view = big.narrow(0, 10, 10);
    big = Tensor();
    EXPECT_EQ(shared_memory_stats().bytes, before.bytes + (4u << 20)) << "a view still holds the segment";
  }
  EXPECT_EQ(shared_memory_stats().bytes, before.bytes);
}

TEST(SharedMemory, RefusesUnsealedOrTooSmallSegmentsAndResizes) {
  int fd = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  expect_error<ValueError>([&] { storage_from_shared_fd(fd, 0, 16); }, {"not sealed"});
  close(fd);

  Tensor t = zeros({2 << 20});  // own segment of 8 MiB
  Storage s = t.impl()->storage();
  share_storage(*s);
  expect_error<ValueError>([&] { storage_from_shared_fd(s->shared_segment()->fd(), 8u << 20, 1); },
                           {"does not fit", "8388608"});
  expect_error<Error>([&] { s->resize(16); }, {"shared-memory storage cannot be resized"});
}

TEST(SharedMemory, AForkedChildRunsParallelKernels) {
  // The parent's thread pool is running; the child must make its own.
  Tensor a = ones({1 << 20});
  Tensor warm = add(a, a);
  EXPECT_EQ(in_child([&] {
              Tensor b = add(a, a);
              return b.data<float>()[(1 << 20) - 1] == 2.0f ? 0 : 1;
            }),
            0);
}

}  // namespace
}  // namespace trainrun
