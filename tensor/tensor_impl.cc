#include "tensor/tensor_impl.h"

#include "base/error.h"

namespace trainrun {

const char* dispatch_key_name(DispatchKey k) {
  switch (k) {
    case DispatchKey::CPU: return "CPU";
    case DispatchKey::CUDA: return "CUDA";
    case DispatchKey::Meta: return "Meta";
    case DispatchKey::PythonKernel: return "PythonKernel";
    case DispatchKey::Tracing: return "Tracing";
    case DispatchKey::Autograd: return "Autograd";
    case DispatchKey::Autocast: return "Autocast";
    default: return "?";
  }
}

void throw_no_data_on_meta() {
  throw Error("a meta tensor has no data: it only has a shape and dtype (materialise it first, e.g. "
              "module.to_empty(device='cpu') then initialise it)");
}

DispatchKey backend_key(Device d) {
  switch (d.type) {
    case DeviceType::CUDA: return DispatchKey::CUDA;
    case DeviceType::Meta: return DispatchKey::Meta;
    default: return DispatchKey::CPU;
  }
}

TensorImpl::TensorImpl(Storage storage, DType dtype, IntList sizes, IntList strides, int64_t offset)
    : storage_(std::move(storage)), sizes_(std::move(sizes)), strides_(std::move(strides)),
      offset_(offset), dtype_(dtype) {
  keys_ = DispatchKeySet(backend_key(storage_->device()));
  refresh();
}

void TensorImpl::set_geometry(IntList sizes, IntList strides, int64_t offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::refresh() {
  TR_CHECK(sizes_.size() == strides_.size(), ValueError,
           "tensor geometry: {} sizes but {} strides", sizes_.size(), strides_.size());
  numel_ = 1;
  for (int64_t s : sizes_) {
    TR_CHECK(s >= 0, ValueError, "tensor geometry: negative size {} in {}", s, sizes_);
    numel_ *= s;
  }
  // Contiguous = row-major; dims of size 1 may have any stride (as PyTorch).
  contiguous_ = true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sizes_.size()) - 1; d >= 0; --d) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) { contiguous_ = false; break; }
    expected *= sizes_[d];
  }
  if (numel_ == 0) contiguous_ = true;
}

}  // namespace trainrun
