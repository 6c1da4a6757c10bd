#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "tensor/allocator.h"
#include "tensor/storage.h"

namespace trainrun {

namespace {
thread_local bool t_allocating_inference_tensors = false;
}  // namespace

bool allocating_inference_tensors() { return t_allocating_inference_tensors; }
void set_allocating_inference_tensors(bool on) { t_allocating_inference_tensors = on; }

void StorageImpl::resize(size_t nbytes) {
  if (nbytes == nbytes_) return;
  TR_CHECK(shared_segment_ == nullptr, Error,
           "storage resize: a shared-memory storage cannot be resized (its size is sealed in every process that "
           "maps it); clone the tensor first (got {} -> {} bytes)", nbytes_, nbytes);
  const Device device = data_.device();
  const size_t keep = std::min(nbytes, nbytes_);
  TR_CHECK(keep == 0 || device.is_cpu() || device.is_meta(), NotImplementedError,
           "storage resize on {} keeps no bytes: resize to 0 first, or from 0 (got {} -> {} bytes)", device.str(),
           nbytes_, nbytes);
  DataPtr fresh = allocator_for(device)->allocate(nbytes, device);
  if (keep > 0 && device.is_cpu()) std::memcpy(fresh.get(), data_.get(), keep);
  data_ = std::move(fresh);
  nbytes_ = nbytes;
}

void StorageImpl::set_shared(DataPtr data, std::shared_ptr<SharedSegment> segment, size_t offset) {
  data_ = std::move(data);
  shared_segment_ = std::move(segment);
  shared_offset_ = offset;
}

}  // namespace trainrun
