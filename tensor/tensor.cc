#include "tensor/tensor.h"

#include "tensor/ops.h"

namespace trainrun {

TensorImpl* Tensor::checked() const {
  TR_CHECK(impl_, ValueError, "operation on an undefined Tensor (default-constructed or moved-from)");
  return impl_.get();
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim == 0 ? 1 : ndim;  // a 0-dim tensor accepts dim 0 and -1, as PyTorch
  TR_CHECK(dim >= -n && dim < n, IndexError, "{}: dim {} is out of range for a tensor with {} dims (expected in [{}, {}])",
           op, dim, ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

Scalar Tensor::item() const {
  TR_CHECK(numel() == 1, ValueError, "item(): expected a tensor with one element, got shape {}", shape_str());
  if (!device().is_cpu()) return cpu().item();  // waits for the GPU, like PyTorch's .item()
  return visit_dtype(dtype(), "item", [&](auto tag) -> Scalar {
    using T = decltype(tag);
    return Scalar(*static_cast<const T*>(data_ptr()));
  });
}

std::string Tensor::shape_str() const { return fmt::format("[{}]", fmt::join(sizes(), ", ")); }

Tensor Tensor::view(IntList s) const { return trainrun::view(*this, s); }
Tensor Tensor::reshape(IntList s) const { return trainrun::reshape(*this, s); }
Tensor Tensor::permute(IntList d) const { return trainrun::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return trainrun::transpose(*this, a, b); }
Tensor Tensor::t() const { return trainrun::t(*this); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return trainrun::narrow(*this, d, s, l); }
Tensor Tensor::select(int64_t d, int64_t i) const { return trainrun::select(*this, d, i); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t step) const {
  return trainrun::slice(*this, d, s, e, step);
}
Tensor Tensor::expand(IntList s) const { return trainrun::expand(*this, s); }
Tensor Tensor::squeeze() const { return trainrun::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return trainrun::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return trainrun::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return trainrun::flatten(*this, s, e); }
Tensor Tensor::contiguous() const { return trainrun::contiguous(*this); }
Tensor Tensor::clone() const { return trainrun::clone(*this); }
Tensor Tensor::to(DType d) const { return trainrun::to(*this, d); }
Tensor& Tensor::copy_(const Tensor& src) { return trainrun::copy_(*this, src); }
Tensor Tensor::to(Device d, bool non_blocking) const { return trainrun::to(*this, d, std::nullopt, non_blocking); }
Tensor Tensor::cuda(int index, bool non_blocking) const {
  return trainrun::to(*this, Device(DeviceType::CUDA, static_cast<int16_t>(index)), std::nullopt, non_blocking);
}
Tensor Tensor::cpu() const { return trainrun::to(*this, Device(DeviceType::CPU)); }
Tensor& Tensor::fill_(const Scalar& v) { return trainrun::fill_(*this, v); }
Tensor& Tensor::zero_() { return trainrun::zero_(*this); }
Tensor Tensor::operator-() const { return trainrun::neg(*this); }
Tensor Tensor::sum() const { return trainrun::sum(*this); }
Tensor Tensor::mean() const { return trainrun::mean(*this); }

}  // namespace trainrun
