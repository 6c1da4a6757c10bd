#pragma once
// Tensor: a cheap refcounted handle over a TensorImpl. Copying a Tensor
// shares the data (like a Python reference); use clone() for a copy.
// Ops are free functions (ops.h), with methods here for the common ones.
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tensor/scalar.h"
#include "tensor/tensor_impl.h"

namespace trainrun {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(intrusive_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  const intrusive_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  int64_t dim() const { return static_cast<int64_t>(checked()->sizes().size()); }
  const IntList& sizes() const { return checked()->sizes(); }
  const IntList& strides() const { return checked()->strides(); }
  // Size/stride of dim d; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return checked()->numel(); }
  DType dtype() const { return checked()->dtype(); }
  Device device() const { return checked()->device(); }
  int64_t storage_offset() const { return checked()->storage_offset(); }
  int64_t element_size() const { return trainrun::element_size(dtype()); }
  int64_t nbytes() const { return numel() * element_size(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  DispatchKeySet key_set() const { return checked()->key_set(); }

  // Address of the first element.
  void* data_ptr() const { return checked()->data(); }
  // Typed data pointer; throws TypeError when T does not match dtype().
  template <typename T> T* data() const;
  // The value of a one-element tensor.
  Scalar item() const;
  template <typename T> T item() const { return item().to<T>(); }

  std::string str() const;  // like print(tensor) in PyTorch (a GPU tensor is copied to the CPU first)
  std::string shape_str() const;  // "[2, 3]"

  // --- methods for the most used ops (each forwards to the free function) ---
  Tensor view(IntList sizes) const;
  Tensor reshape(IntList sizes) const;
  Tensor permute(IntList dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor expand(IntList sizes) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // This tensor on `device`; non_blocking returns before a copy between a GPU
  // and pinned CPU memory is done (order it with streams or synchronize).
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor cuda(int index = -1, bool non_blocking = false) const;
  Tensor cpu() const;
  bool is_cuda() const { return device().is_cuda(); }
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& v);
  Tensor& zero_();

  Tensor operator-() const;
  Tensor sum() const;
  Tensor mean() const;

 private:
  TensorImpl* checked() const;
  intrusive_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// The union of the dispatch keys of the defined tensors among args.
inline DispatchKeySet keys_of() { return DispatchKeySet(); }
template <typename... Rest>
DispatchKeySet keys_of(const Tensor& t, const Rest&... rest) {
  DispatchKeySet k = t.defined() ? t.key_set() : DispatchKeySet();
  return k | keys_of(rest...);
}

// Wraps a dim index that may be negative; throws IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

template <typename T> T* Tensor::data() const {
  TR_CHECK(dtype_of<T>::value == dtype(), TypeError, "Tensor::data<{}>() called on a tensor of dtype {}",
           dtype_name(dtype_of<T>::value), dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}

}  // namespace trainrun
