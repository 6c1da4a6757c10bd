// CPU copy_ (any strides, any dtypes, broadcasting src) and fill_.
#include <algorithm>
#include <cstring>

#include "tensor/cpu/convert.h"
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/tensor_iterator.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

bool same_geometry(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset();
}

void parallel_memcpy(char* dst, const char* src, int64_t nbytes) {
  parallel_for(0, nbytes, 1 << 20, [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, e - b); });
}

Tensor& copy_cpu(Tensor& dst, const Tensor& src_in) {
  TR_CHECK(src_in.device().is_cpu(), NotImplementedError, "copy_: copying from {} to cpu needs the CUDA backend",
           src_in.device().str());
  if (dst.numel() == 0) return dst;
  Tensor src = src_in;
  if (src.sizes() != dst.sizes()) {  // broadcasts (copy_'s front checked that it can)
    src = expand(src, dst.sizes());
  }
  if (dst.impl()->storage() == src.impl()->storage()) {
    if (same_geometry(dst, src) && dst.dtype() == src.dtype()) return dst;
    src = clone(src);  // overlapping views: read from a snapshot
  }
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    parallel_memcpy(static_cast<char*>(dst.data_ptr()), static_cast<const char*>(src.data_ptr()), dst.nbytes());
    return dst;
  }
  IteratorConfig config;
  config.op = "copy_";
  config.compute_dtype = src.dtype();
  config.output_dtype = dst.dtype();
  TensorIterator iter(config, dst, {src});
  visit_dtype(dst.dtype(), "copy_", [&](auto dst_tag) {
    using D = decltype(dst_tag);
    visit_dtype(src.dtype(), "copy_", [&](auto src_tag) {
      using S = decltype(src_tag);
      iter.for_each([](char** data, const int64_t* strides, int64_t n) {
        char* out = data[0];
        const char* in = data[1];
        if (strides[0] == sizeof(D) && strides[1] == sizeof(S)) {
          D* o = reinterpret_cast<D*>(out);
          const S* s = reinterpret_cast<const S*>(in);
          for (int64_t i = 0; i < n; ++i) o[i] = convert<D>(s[i]);
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<D*>(out + i * strides[0]) = convert<D>(*reinterpret_cast<const S*>(in + i * strides[1]));
        }
      });
    });
  });
  dst.impl()->bump_version();
  return dst;
}

Tensor& fill_cpu(Tensor& x, const Scalar& v) {
  if (x.numel() == 0) return x;
  if (!x.is_contiguous()) {
    Tensor value = full({}, v, x.dtype());
    return copy_(x, value);
  }
  visit_dtype(x.dtype(), "fill_", [&](auto tag) {
    using T = decltype(tag);
    T value = v.to<T>();
    T* p = static_cast<T*>(x.data_ptr());
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, value); });
  });
  x.impl()->bump_version();
  return x;
}

OpKernel<ops::copy_> reg_copy(DispatchKey::CPU, &copy_cpu);
OpKernel<ops::fill_> reg_fill(DispatchKey::CPU, &fill_cpu);

}  // namespace
}  // namespace trainrun
