// copy_ and fill_ for CUDA tensors, registered under DispatchKey::CUDA (any
// copy with a CUDA side lands here): host<->device through cudaMemcpyAsync on
// the current stream, device<->device by memcpy when the layouts match and by
// the conversion kernel otherwise, across GPUs by peer copy.
#include <cstring>

#include "tensor/cuda/cuda_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/elementwise_launch.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/pinned_memory.h"
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/views.h"

namespace trainrun::cuda {
namespace {

bool same_geometry(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset();
}

// A contiguous tensor like `t` (same device), or t itself when it already is.
Tensor contiguous_target(const Tensor& t) {
  return t.is_contiguous() ? t : empty(t.sizes(), TensorOptions(t.dtype(), t.device()));
}

// Copies within one GPU: memcpy when dtypes and dense layouts agree, else the
// conversion kernel through TensorIterator.
void copy_on_device(Tensor& dst, const Tensor& src) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    TR_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                  current_stream(device).handle()));
    return;
  }
  IteratorConfig config;
  config.op = "copy_";
  config.compute_dtype = src.dtype();
  config.output_dtype = dst.dtype();
  TensorIterator iter(config, dst, {src});
  launch_on_device(iter, "copy_", [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_copy(dst.dtype(), src.dtype(), args, s);
  });
}

void copy_between_gpus(Tensor& dst, const Tensor& src_in) {
  const int src_dev = src_in.device().index, dst_dev = dst.device().index;
  Tensor src = contiguous(to(src_in, dst.dtype()));  // converted on the source GPU
  // The destination's stream waits for the source's work so far.
  Event ready;
  ready.record(current_stream(src_dev));
  const Stream stream = current_stream(dst_dev);
  ready.block(stream);
  Tensor target = contiguous_target(dst);
  {
    DeviceGuard guard(dst_dev);
    TR_CUDA_CHECK(cudaMemcpyPeerAsync(target.data_ptr(), dst_dev, src.data_ptr(), src_dev, target.nbytes(),
                                      stream.handle()));
  }
  record_stream(src, stream);  // src may die now; its memory waits for the copy
  if (!target.is_same(dst)) copy_on_device(dst, target);
}

void copy_host_to_device(Tensor& dst, const Tensor& src_in) {
  // Convert and lay out on the CPU, then one transfer.
  Tensor src = contiguous(to(src_in, dst.dtype()));
  const int device = dst.device().index;
  DeviceGuard guard(device);
  const Stream stream = current_stream(device);
  Tensor target = contiguous_target(dst);
  TR_CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), src.data_ptr(), target.nbytes(), cudaMemcpyHostToDevice,
                                stream.handle()));
  const bool pinned = is_pinned(src);
  if (pinned) record_pinned_use(src.data_ptr(), stream);
  if (!target.is_same(dst)) copy_on_device(dst, target);
  // From pageable memory the runtime has consumed the source when the call
  // returns; a blocking copy also waits for the data to land, as in PyTorch.
  if (!(pinned && copy_is_non_blocking())) stream.synchronize();
}

void copy_device_to_host(Tensor& dst, const Tensor& src_in) {
  // Convert and lay out on the GPU, then one transfer.
  Tensor src = contiguous(to(src_in, dst.dtype()));
  const int device = src.device().index;
  DeviceGuard guard(device);
  const Stream stream = current_stream(device);
  Tensor target = contiguous_target(dst);
  TR_CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), src.data_ptr(), target.nbytes(), cudaMemcpyDeviceToHost,
                                stream.handle()));
  const bool async = copy_is_non_blocking() && target.is_same(dst) && is_pinned(target);
  if (async) {
    record_pinned_use(target.data_ptr(), stream);
    return;
  }
  stream.synchronize();
  if (!target.is_same(dst)) dst.copy_(target);
}

Tensor& copy_cuda(Tensor& dst, const Tensor& src_in) {
  dst.impl()->bump_version();  // (every copy_ is a write, also one that moves nothing: see copy_cpu)
  if (dst.numel() == 0) return dst;
  Tensor src = src_in;
  if (src.sizes() != dst.sizes()) {  // broadcasts (copy_'s front checked that it can)
    src = expand(src, dst.sizes());
    if (src.device() != dst.device()) src = contiguous(src);  // materialize before a transfer
  }
  if (dst.impl()->storage() == src.impl()->storage()) {
    if (same_geometry(dst, src) && dst.dtype() == src.dtype()) return dst;
    src = clone(src);  // overlapping views: read from a snapshot
  }
  const bool dst_gpu = dst.device().is_cuda(), src_gpu = src.device().is_cuda();
  if (dst_gpu && src_gpu) {
    if (dst.device() == src.device()) copy_on_device(dst, src);
    else copy_between_gpus(dst, src);
  } else if (dst_gpu) {
    copy_host_to_device(dst, src);
  } else {
    copy_device_to_host(dst, src);
  }
  return dst;
}

Tensor& fill_cuda(Tensor& x, const Scalar& v) {
  if (x.numel() == 0) return x;
  // The value is a CPU scalar of x's dtype, which travels to the kernel by value.
  const TensorIterator iter = fill_iterator(x, v);
  launch_on_device(iter, "fill_", [&](const ElementwiseArgs& args, CUstream_st* s) {
    return launch_copy(x.dtype(), x.dtype(), args, s);
  });
  x.impl()->bump_version();
  return x;
}

OpKernel<ops::copy_> reg_copy(DispatchKey::CUDA, &copy_cuda);
OpKernel<ops::fill_> reg_fill(DispatchKey::CUDA, &fill_cuda);

}  // namespace
}  // namespace trainrun::cuda
