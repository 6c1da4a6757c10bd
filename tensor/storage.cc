#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "tensor/allocator.h"
#include "tensor/storage.h"

namespace trainrun {

void StorageImpl::resize(size_t nbytes) {
  if (nbytes == nbytes_) return;
  const Device device = data_.device();
  const size_t keep = std::min(nbytes, nbytes_);
  TR_CHECK(keep == 0 || device.is_cpu(), NotImplementedError,
           "storage resize on {} keeps no bytes: resize to 0 first, or from 0 (got {} -> {} bytes)", device.str(),
           nbytes_, nbytes);
  DataPtr fresh = allocator_for(device)->allocate(nbytes, device);
  if (keep > 0) std::memcpy(fresh.get(), data_.get(), keep);
  data_ = std::move(fresh);
  nbytes_ = nbytes;
}

}  // namespace trainrun
