#pragma once
// CUDA tensors shared with other processes of the node (CUDA IPC, the legacy
// cudaIpcGetMemHandle path: the caching allocator's segments are cudaMalloc
// allocations, which that path exports; the VMM path needs segments made by
// cuMemCreate).
//
// The producer exports a storage's block: the handle names the whole
// allocation (segment) with the block's offset in it, and an interprocess
// event recorded on the current stream, which the consumer's stream waits
// for before it touches the memory. Exporting takes a lease on the block in
// the producer's caching allocator: the producer may drop its tensor at once,
// and the block returns to its pool only when release_export is called for
// every export (the broker, launcher/ipc_broker.h, says when: when each
// consumer's tensor dies, or the consumer does). The consumer opens an
// allocation once however many tensors use it, and closes it with the last.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "tensor/storage.h"

namespace trainrun::cuda {

struct IpcHandle {
  std::string memory;      // a cudaIpcMemHandle_t's bytes: the producer's allocation
  std::string event;       // a cudaIpcEventHandle_t's bytes: its stream's work up to the export
  int device = 0;
  size_t segment_bytes = 0;
  size_t offset = 0;       // of the storage's block in the allocation
  size_t nbytes = 0;       // of the storage
  uintptr_t block = 0;     // the producer's block address: names the export in the producer and the broker
};

// Exports `storage` (on a CUDA device, from the caching allocator): one lease
// taken on its block, and one event (kept until the lease is released).
IpcHandle export_storage(const StorageImpl& storage);
// Gives back one lease of export_storage; the block goes back to the pool
// with the last lease once its tensor is gone too.
void release_export(int device, uintptr_t block);
// Exports still leased by this process, for ipc_collect's report.
size_t exported_blocks_leased();

// A storage over another process's export. `on_release` runs once, when the
// last tensor on the storage is gone (after the allocation is closed, when
// it was the last storage on it): it releases the lease at the broker.
Storage storage_from_ipc_handle(const IpcHandle& handle, std::function<void()> on_release);
// Allocations of other processes this process has open now.
size_t open_ipc_allocations();

}  // namespace trainrun::cuda
