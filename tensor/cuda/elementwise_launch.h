#pragma once
// From a TensorIterator to a CUDA launch: the iterator's coalesced geometry
// packed into ElementwiseArgs, and the device/stream the kernel runs on.
#include "tensor/cuda/kernels/kernel_args.h"
#include "tensor/cuda/runtime.h"
#include "tensor/cuda/stream.h"
#include "tensor/scalar.h"
#include "tensor/tensor_iterator.h"

namespace trainrun::cuda {

// The launch geometry of `iter`; CPU scalar operands travel by value.
ElementwiseArgs elementwise_args(const TensorIterator& iter);
// The same with every operand read from memory, wherever it lives (tests run
// the kernels' per-element code over CPU iterators with it).
ElementwiseArgs elementwise_geometry(const TensorIterator& iter);
// The iterator fill_ launches over: x as the output, s as a 0-dim value of
// x's dtype broadcast over all of it.
TensorIterator fill_iterator(const Tensor& x, const Scalar& s);
// `s` in the form kernels read for compute dtype `dt`.
KernelScalar kernel_scalar(const Scalar& s, DType dt);

// Throws (naming `op`) when err, a launch's cudaError_t, is not success;
// cudaErrorInvalidValue means the kernel has no case for the dtype.
void check_launch(int err, const char* op);

// Runs `launch(args, stream)` for iter on its output's device and current
// stream, throwing CudaError (naming `op`) when the launch fails.
template <typename Launch>
void launch_on_device(const TensorIterator& iter, const char* op, Launch launch) {
  if (iter.numel() == 0) return;
  const int device = iter.operand(0).device().index;
  DeviceGuard guard(device);
  check_launch(launch(elementwise_args(iter), current_stream(device).handle()), op);
}

}  // namespace trainrun::cuda
