#pragma once
// The data behind a Tensor handle: sizes, strides, storage offset, dtype,
// the storage, the dispatch keys, and a slot for autograd's metadata.
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/dispatch_key.h"
#include "tensor/dtype.h"
#include "tensor/storage.h"

namespace trainrun {

using IntList = std::vector<int64_t>;

// Filled in by autograd/ (grad, grad_fn, hooks); tensor/ only owns the slot.
class AutogradMetaInterface {
 public:
  virtual ~AutogradMetaInterface() = default;
};

[[noreturn]] void throw_no_data_on_meta();

class TensorImpl : public RefCounted {
 public:
  TensorImpl(Storage storage, DType dtype, IntList sizes, IntList strides, int64_t offset);

  const IntList& sizes() const { return sizes_; }
  const IntList& strides() const { return strides_; }
  int64_t storage_offset() const { return offset_; }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  const Storage& storage() const { return storage_; }
  bool is_contiguous() const { return contiguous_; }
  DispatchKeySet key_set() const { return keys_; }
  void add_key(DispatchKey k) { keys_ = keys_ | DispatchKeySet(k); }
  void remove_key(DispatchKey k) { keys_ = keys_ - DispatchKeySet(k); }
  // Address of element [0, 0, ...]. A meta tensor has none: asking is an error.
  char* data() const {
    if (__builtin_expect(storage_->device().is_meta(), 0)) throw_no_data_on_meta();
    return static_cast<char*>(storage_->data()) + offset_ * element_size(dtype_);
  }

  // Re-points this impl at new geometry (used by in-place resize and as_strided_).
  void set_geometry(IntList sizes, IntList strides, int64_t offset);
  void set_storage(Storage s) { storage_ = std::move(s); }
  // A 0-dim tensor made from a number by an op overload: it promotes like a
  // Python number (by category only), see result_type.
  bool is_wrapped_number() const { return wrapped_number_; }
  void set_wrapped_number(bool w) { wrapped_number_ = w; }

  AutogradMetaInterface* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaInterface> m) { autograd_meta_ = std::move(m); }
  // Bumped by every in-place write; autograd checks saved tensors against it.
  // Views share the counter of their base through the shared_ptr.
  uint64_t version() const { return *version_; }
  void bump_version() { ++*version_; }
  // Only for writes autograd must not count (torch.autograd._unsafe_preserve_version_counter).
  void set_version(uint64_t v) { *version_ = v; }
  void share_version_with(const TensorImpl& base) { version_ = base.version_; }
  // True while another impl (a view, the base, a detached alias) shares the counter.
  bool shares_version() const { return version_.use_count() > 1; }
  // The counter itself (a saved tensor packed by saved_tensors_hooks keeps it to check its version at unpack).
  std::shared_ptr<const uint64_t> version_counter() const { return version_; }

 private:
  void refresh();
  Storage storage_;
  IntList sizes_, strides_;
  int64_t offset_;
  int64_t numel_ = 1;
  DType dtype_;
  bool contiguous_ = true;
  bool wrapped_number_ = false;
  DispatchKeySet keys_;
  std::shared_ptr<uint64_t> version_ = std::make_shared<uint64_t>(0);
  std::unique_ptr<AutogradMetaInterface> autograd_meta_;
};

}  // namespace trainrun
