#pragma once
// Collectives between the ranks of one host through shared memory, instead
// of Gloo's TCP sockets on loopback (two kernel copies per hop). Each rank
// owns one segment: a header (its barrier epoch, its pid) and a slot that
// peers read directly. Large buffers go through the slot in chunks;
// reductions are split so that each rank reduces one slice of every chunk
// (every rank then holds bit-identical results).
//
// Every rank of the group constructs it, in the same order relative to
// other store traffic. A dead peer is noticed within ~100 ms (its pid is
// gone); a live but absent one at the timeout. Either way the collective
// throws DistBackendError naming the ranks that had not arrived.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

#include "c10d/reduce_op.h"
#include "c10d/shm/shm_segment.h"
#include "store/store.h"

namespace trainrun {
namespace c10d {

class ShmCommunicator {
 public:
  static constexpr size_t kDefaultSlotBytes = size_t{4} << 20;

  ShmCommunicator(Store& store, int rank, int size, std::chrono::milliseconds timeout,
                  size_t slot_bytes = kDefaultSlotBytes);

  // True when every rank of the group runs on this host with the same
  // /dev/shm, and none disabled shared memory (TRAINRUN_SHM_COLLECTIVES=0):
  // an answer all ranks agree on (it goes through the store).
  static bool usable(Store& store, int rank, int size);

  // In place: numel elements of elem_size bytes, combined with fn.
  void allreduce(void* data, size_t numel, size_t elem_size, const ReduceFn& fn);
  // out[r * bytes_per_rank ...] = rank r's in.
  void allgather(const void* in, void* out, size_t bytes_per_rank);
  // out = fn over ranks of their in[rank() * numel_per_rank ...].
  void reduce_scatter(const void* in, void* out, size_t numel_per_rank, size_t elem_size, const ReduceFn& fn);
  // Several allgathers as one, straight between the pieces and the slots (no packing, no staging): this
  // rank's piece i (bytes[i] bytes at ins[i]) lands at outs[i] + r * bytes[i] on every rank, for r its rank.
  // Every rank passes the same sizes.
  void allgather_pieces(const std::vector<const char*>& ins, const std::vector<char*>& outs,
                        const std::vector<size_t>& bytes);
  // Several reduce-scatters as one: ins[i] holds size() chunks of numels[i] elements, and outs[i] receives
  // the reduction over the ranks of their chunk rank() of ins[i].
  void reduce_scatter_pieces(const std::vector<const char*>& ins, const std::vector<char*>& outs,
                             const std::vector<size_t>& numels, size_t elem_size, const ReduceFn& fn);
  void broadcast(void* data, size_t bytes, int root);
  // Every rank sends send_bytes[r] bytes to rank r and receives recv_bytes[r] from it, into out at
  // recv_offsets[r]. pack(dst, first, n, to) writes bytes [first, first + n) of the message to dst into
  // `to` (so a caller can copy strided data straight into the segment, without a contiguous copy first).
  // Messages travel in slices of whole multiples of `align` bytes.
  using PackFn = std::function<void(int dst, size_t first, size_t n, char* to)>;
  void alltoall(const std::vector<size_t>& send_bytes, const std::vector<size_t>& recv_bytes,
                const std::vector<size_t>& recv_offsets, size_t align, const PackFn& pack, char* out);

 private:
  struct Header;
  Header* header(int r) const;
  char* slot(int r) const;
  // Every rank's matching call returns together; throws on a dead peer or the timeout.
  void barrier();

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  size_t slot_bytes_;
  std::vector<ShmSegment> segments_;  // by rank; our own is the one we created
  uint64_t epoch_ = 0;
};

}  // namespace c10d
}  // namespace trainrun
