#include "tensor/cuda/elementwise_launch.h"

#include <cstring>

#include "tensor/cuda/cuda_check.h"
#include "tensor/factories.h"

namespace trainrun::cuda {

namespace {

// Whether every operand in memory steps one element at a time through a single dim.
bool dense(const ElementwiseArgs& a) {
  if (a.ndim != 1) return false;
  for (int k = 0; k < a.nops; ++k)
    if (a.data[k] != nullptr && a.strides[0][k] != a.element_size[k]) return false;
  return true;
}

}  // namespace

ElementwiseArgs elementwise_geometry(const TensorIterator& iter) {
  ElementwiseArgs a;
  const IntList& sizes = iter.iter_sizes();
  const auto& strides = iter.iter_strides();
  TR_CHECK(iter.ntensors() <= kMaxElementwiseOperands, NotImplementedError,
           "CUDA elementwise kernels take at most {} operands, got {}", kMaxElementwiseOperands, iter.ntensors());
  TR_CHECK(static_cast<int>(sizes.size()) <= kMaxElementwiseDims, NotImplementedError,
           "CUDA elementwise kernels handle at most {} non-mergeable dims, got {} (make the tensor contiguous first)",
           kMaxElementwiseDims, sizes.size());
  a.ndim = static_cast<int>(sizes.size());
  a.nops = iter.ntensors();
  a.numel = iter.numel();
  for (int d = 0; d < a.ndim; ++d) {
    a.sizes[d] = sizes[d];
    for (int k = 0; k < a.nops; ++k) a.strides[d][k] = strides[d][k];
  }
  for (int k = 0; k < a.nops; ++k) {
    const Tensor& t = iter.operand(k);
    a.element_size[k] = t.element_size();
    a.data[k] = static_cast<char*>(t.data_ptr());
  }
  a.contiguous = dense(a);
  return a;
}

ElementwiseArgs elementwise_args(const TensorIterator& iter) {
  ElementwiseArgs a = elementwise_geometry(iter);
  for (int k = 0; k < a.nops; ++k) {
    const Tensor& t = iter.operand(k);
    if (!t.device().is_cpu()) continue;
    // A wrapped number: its value rides along in the kernel's arguments.
    TR_CHECK(k > 0 && t.numel() == 1, TypeError, "CUDA kernel got a CPU tensor of shape {} as operand {}",
             t.shape_str(), k);
    std::memcpy(a.scalars[k], t.data_ptr(), t.element_size());
    a.data[k] = nullptr;
    for (int d = 0; d < a.ndim; ++d) a.strides[d][k] = 0;
  }
  a.contiguous = dense(a);
  return a;
}

TensorIterator fill_iterator(const Tensor& x, const Scalar& s) {
  IteratorConfig config;
  config.op = "fill_";
  config.compute_dtype = x.dtype();
  config.shape_from_output = true;
  return TensorIterator(config, x, {full({}, s, x.dtype())});
}

KernelScalar kernel_scalar(const Scalar& s, DType dt) {
  KernelScalar k;
  k.f = s.to_double();
  k.i = dt == DType::Bool ? static_cast<int64_t>(s.to<bool>()) : s.to_int();
  return k;
}

void check_launch(int err, const char* op) {
  if (err == static_cast<int>(cudaErrorInvalidValue)) {
    cudaGetLastError();
    throw NotImplementedError(fmt::format("{}: no CUDA kernel for this dtype", op));
  }
  if (err != 0) {
    cudaError_t e = static_cast<cudaError_t>(err);
    cudaGetLastError();
    throw CudaError(fmt::format("{}: CUDA kernel launch failed: {} ({})", op, cudaGetErrorName(e), cudaGetErrorString(e)));
  }
}

}  // namespace trainrun::cuda
