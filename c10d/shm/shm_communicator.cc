#include "c10d/shm/shm_communicator.h"

#include <immintrin.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "base/error.h"

namespace trainrun {
namespace c10d {

struct ShmCommunicator::Header {
  alignas(64) std::atomic<uint64_t> epoch;
  alignas(64) int32_t pid;
};

namespace {

constexpr size_t kHeaderBytes = 128;
static_assert(sizeof(std::atomic<uint64_t>) == 8 && kHeaderBytes >= 2 * 64, "header layout");

// What identifies "the same machine and the same /dev/shm".
std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  struct stat st {};
  stat("/dev/shm", &st);
  return fmt::format("{}|{}|{}:{}", name, boot_id, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

// Gone, or a zombie not reaped yet (its parent died too, and whoever
// inherits it may take a while).
bool process_exited(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  std::ifstream in(path);
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool enabled_here() {
  const char* v = std::getenv("TRAINRUN_SHM_COLLECTIVES");
  return v == nullptr || std::string(v) != "0";
}

}  // namespace

bool ShmCommunicator::usable(Store& store, int rank, int size) {
  const std::string mine = (enabled_here() ? "on|" : "off|") + host_identity();
  store.set("shm/host/" + std::to_string(rank), to_bytes(mine));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("shm/host/" + std::to_string(r));
  for (const Bytes& other : store.multi_get(keys))
    if (to_string(other) != mine) return false;
  return enabled_here();
}

ShmCommunicator::ShmCommunicator(Store& store, int rank, int size, std::chrono::milliseconds timeout, size_t slot_bytes)
    : rank_(rank), size_(size), timeout_(timeout), slot_bytes_(slot_bytes) {
  // A name no other job on this host uses: rank 0 draws it for everyone.
  if (rank == 0) {
    std::random_device rd;
    const uint64_t uid = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
    store.set("shm/uid", to_bytes(fmt::format("{:016x}", uid)));
  }
  const std::string uid = to_string(store.get("shm/uid"));
  auto name_of = [&](int r) { return fmt::format("/trainrun-{}-{}", uid, r); };
  const size_t bytes = kHeaderBytes + slot_bytes_;
  segments_.resize(size);
  segments_[rank] = ShmSegment::create(name_of(rank), bytes);
  try {
    header(rank)->pid = static_cast<int32_t>(getpid());
    store.set("shm/created/" + std::to_string(rank), to_bytes("1"));
    std::vector<std::string> created, mapped;
    for (int r = 0; r < size; ++r) {
      created.push_back("shm/created/" + std::to_string(r));
      mapped.push_back("shm/mapped/" + std::to_string(r));
    }
    store.wait(created, timeout);
    for (int r = 0; r < size; ++r)
      if (r != rank) segments_[r] = ShmSegment::open(name_of(r), bytes);
    store.set("shm/mapped/" + std::to_string(rank), to_bytes("1"));
    store.wait(mapped, timeout);
  } catch (...) {
    segments_[rank].unlink();  // a peer that never came (a timeout, a store error): the name goes all the same
    throw;
  }
  // Everyone has it mapped: the name can go, so a crash leaves nothing behind.
  segments_[rank].unlink();
}

ShmCommunicator::Header* ShmCommunicator::header(int r) const { return static_cast<Header*>(segments_[r].data()); }

char* ShmCommunicator::slot(int r) const { return static_cast<char*>(segments_[r].data()) + kHeaderBytes; }

void ShmCommunicator::barrier() {
  const uint64_t target = ++epoch_;
  header(rank_)->epoch.store(target, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  auto next_liveness_check = start + std::chrono::milliseconds(100);
  for (int r = 0; r < size_; ++r) {
    uint64_t spins = 0;
    while (header(r)->epoch.load(std::memory_order_acquire) < target) {
      // Spin briefly (peers usually arrive within microseconds), then yield:
      // with more ranks than cores, spinning would starve the peers we wait for.
      if (++spins < 1000) {
        _mm_pause();
        continue;
      }
      sched_yield();
      if ((spins & 63) != 0) continue;
      const auto now = std::chrono::steady_clock::now();
      const bool timed_out = now - start > timeout_;
      if (!timed_out && now < next_liveness_check) continue;
      next_liveness_check = now + std::chrono::milliseconds(100);
      std::vector<std::string> missing;
      bool any_dead = false;
      for (int q = 0; q < size_; ++q) {
        if (header(q)->epoch.load(std::memory_order_acquire) >= target) continue;
        const int pid = header(q)->pid;
        const bool dead = process_exited(pid);
        any_dead = any_dead || dead;
        missing.push_back(dead ? fmt::format("{} (pid {} has exited)", q, pid) : std::to_string(q));
      }
      if (any_dead || timed_out)
        throw DistBackendError(fmt::format("shared-memory barrier: ranks that had not arrived after {} ms: {}",
                                           std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count(),
                                           fmt::join(missing, ", ")));
    }
  }
}

void ShmCommunicator::allreduce(void* data, size_t numel, size_t elem_size, const ReduceFn& fn) {
  char* d = static_cast<char*>(data);
  const size_t chunk_elems = slot_bytes_ / elem_size;
  char* mine = slot(rank_);
  for (size_t off = 0; off < numel; off += chunk_elems) {
    const size_t n = std::min(chunk_elems, numel - off);
    std::memcpy(mine, d + off * elem_size, n * elem_size);
    barrier();
    // Rank r reduces slice r of the chunk (into its own slot; peers read other slices).
    const size_t per = (n + size_ - 1) / size_;
    auto slice = [&](int r) { return std::make_pair(std::min(n, r * per), std::min(n, (r + 1) * per)); };
    auto [s0, s1] = slice(rank_);
    if (s1 > s0)
      for (int q = 0; q < size_; ++q)
        if (q != rank_) fn(mine + s0 * elem_size, mine + s0 * elem_size, slot(q) + s0 * elem_size, s1 - s0);
    barrier();
    for (int q = 0; q < size_; ++q) {
      auto [q0, q1] = slice(q);
      if (q1 > q0) std::memcpy(d + (off + q0) * elem_size, slot(q) + q0 * elem_size, (q1 - q0) * elem_size);
    }
    barrier();  // slots are reused by the next chunk
  }
}

void ShmCommunicator::allgather(const void* in, void* out, size_t bytes_per_rank) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  for (size_t off = 0; off < bytes_per_rank; off += slot_bytes_) {
    const size_t len = std::min(slot_bytes_, bytes_per_rank - off);
    std::memcpy(slot(rank_), src + off, len);
    barrier();
    for (int q = 0; q < size_; ++q) std::memcpy(dst + q * bytes_per_rank + off, slot(q), len);
    barrier();
  }
}

void ShmCommunicator::reduce_scatter(const void* in, void* out, size_t numel_per_rank, size_t elem_size,
                                     const ReduceFn& fn) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  // The slot holds one piece per destination rank.
  const size_t piece_elems = std::max<size_t>(1, slot_bytes_ / elem_size / size_);
  for (size_t off = 0; off < numel_per_rank; off += piece_elems) {
    const size_t n = std::min(piece_elems, numel_per_rank - off);
    for (int q = 0; q < size_; ++q)
      std::memcpy(slot(rank_) + q * piece_elems * elem_size, src + (q * numel_per_rank + off) * elem_size,
                  n * elem_size);
    barrier();
    char* o = dst + off * elem_size;
    std::memcpy(o, slot(0) + rank_ * piece_elems * elem_size, n * elem_size);
    for (int q = 1; q < size_; ++q) fn(o, o, slot(q) + rank_ * piece_elems * elem_size, n);
    barrier();
  }
}

namespace {

// Pieces of `sizes` units laid back to back form a stream; for each piece's part inside the stream's
// [begin, begin + len), calls fn(piece, offset in the piece, offset from begin, units).
template <class Fn>
void for_each_part(const std::vector<size_t>& sizes, size_t begin, size_t len, Fn fn) {
  size_t start = 0;
  for (size_t i = 0; i < sizes.size() && start < begin + len; start += sizes[i], ++i) {
    const size_t lo = std::max(start, begin), hi = std::min(start + sizes[i], begin + len);
    if (lo < hi) fn(i, lo - start, lo - begin, hi - lo);
  }
}

}  // namespace

void ShmCommunicator::allgather_pieces(const std::vector<const char*>& ins, const std::vector<char*>& outs,
                                       const std::vector<size_t>& bytes) {
  size_t total = 0;
  for (size_t b : bytes) total += b;
  for (size_t off = 0; off < total; off += slot_bytes_) {
    const size_t len = std::min(slot_bytes_, total - off);
    char* mine = slot(rank_);
    for_each_part(bytes, off, len,
                  [&](size_t i, size_t at, size_t in_slot, size_t n) { std::memcpy(mine + in_slot, ins[i] + at, n); });
    barrier();
    for (int q = 0; q < size_; ++q) {
      const char* theirs = slot(q);
      for_each_part(bytes, off, len, [&](size_t i, size_t at, size_t in_slot, size_t n) {
        std::memcpy(outs[i] + q * bytes[i] + at, theirs + in_slot, n);
      });
    }
    barrier();
  }
}

void ShmCommunicator::reduce_scatter_pieces(const std::vector<const char*>& ins, const std::vector<char*>& outs,
                                            const std::vector<size_t>& numels, size_t elem_size, const ReduceFn& fn) {
  size_t total = 0;
  for (size_t n : numels) total += n;
  // As reduce_scatter: the slot holds one region per destination rank, each a window of the pieces' stream.
  const size_t piece_elems = std::max<size_t>(1, slot_bytes_ / elem_size / size_);
  for (size_t off = 0; off < total; off += piece_elems) {
    const size_t len = std::min(piece_elems, total - off);
    for (int q = 0; q < size_; ++q) {
      char* region = slot(rank_) + q * piece_elems * elem_size;
      for_each_part(numels, off, len, [&](size_t i, size_t at, size_t in_slot, size_t n) {
        std::memcpy(region + in_slot * elem_size, ins[i] + (q * numels[i] + at) * elem_size, n * elem_size);
      });
    }
    barrier();
    for_each_part(numels, off, len, [&](size_t i, size_t at, size_t in_slot, size_t n) {
      char* o = outs[i] + at * elem_size;
      const size_t from = (rank_ * piece_elems + in_slot) * elem_size;
      std::memcpy(o, slot(0) + from, n * elem_size);
      for (int q = 1; q < size_; ++q) fn(o, o, slot(q) + from, n);
    });
    barrier();
  }
}

void ShmCommunicator::alltoall(const std::vector<size_t>& send_bytes, const std::vector<size_t>& recv_bytes,
                               const std::vector<size_t>& recv_offsets, size_t align, const PackFn& pack,
                               char* out) {
  // The slot holds one piece per destination; every rank must run the same number of rounds, so the
  // largest message of the whole group is agreed on first, through the slots.
  const size_t piece = slot_bytes_ / size_ / align * align;
  TR_CHECK(piece > 0, ValueError, "shared-memory alltoall: {}-byte units do not fit {} ranks in a {}-byte slot",
           align, size_, slot_bytes_);
  size_t largest = 0;
  for (int r = 0; r < size_; ++r) largest = std::max({largest, send_bytes[r], recv_bytes[r]});
  std::memcpy(slot(rank_), &largest, sizeof(largest));
  barrier();
  for (int q = 0; q < size_; ++q) {
    size_t theirs = 0;
    std::memcpy(&theirs, slot(q), sizeof(theirs));
    largest = std::max(largest, theirs);
  }
  barrier();
  for (size_t first = 0; first < largest; first += piece) {
    for (int dst = 0; dst < size_; ++dst)
      if (first < send_bytes[dst]) pack(dst, first, std::min(piece, send_bytes[dst] - first), slot(rank_) + dst * piece);
    barrier();
    for (int src = 0; src < size_; ++src)
      if (first < recv_bytes[src])
        std::memcpy(out + recv_offsets[src] + first, slot(src) + rank_ * piece, std::min(piece, recv_bytes[src] - first));
    barrier();
  }
}

// Pipelined through the two halves of the root's slot: while the others
// copy chunk k out of one half, the root copies chunk k + 1 into the other,
// one barrier per step.
void ShmCommunicator::broadcast(void* data, size_t bytes, int root) {
  char* d = static_cast<char*>(data);
  const size_t half = slot_bytes_ / 2;
  const size_t chunks = (bytes + half - 1) / half;
  auto chunk = [&](size_t k) { return std::make_pair(k * half, std::min(half, bytes - k * half)); };
  for (size_t step = 0; step <= chunks; ++step) {
    if (rank_ == root && step < chunks) {
      auto [off, len] = chunk(step);
      std::memcpy(slot(root) + (step % 2) * half, d + off, len);
    }
    if (rank_ != root && step > 0) {
      auto [off, len] = chunk(step - 1);
      std::memcpy(d + off, slot(root) + ((step - 1) % 2) * half, len);
    }
    // After it, the root's chunk `step` is readable and chunk step - 1 has
    // been read by everyone (so its half can be refilled next step).
    barrier();
  }
}

}  // namespace c10d
}  // namespace trainrun
