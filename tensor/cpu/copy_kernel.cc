// CPU copy_ (any strides, any dtypes, broadcasting src) and fill_.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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

// A copy between tensors of one dtype in other layouts (a permute's contiguous(), a transpose's): the
// iterator's rows (its coalesced innermost dim) copied as raw elements of E's size, the rows' pointers
// stepped like an odometer. Per row this costs a few adds, where for_each's call per row cost more than
// the 32 floats of an attention head's row (24.7 -> 17 us for [8, 64, 4, 32] permuted).
template <typename E>
void copy_rows(const TensorIterator& iter) {
  const IntList& sizes = iter.iter_sizes();  // innermost first
  const std::vector<std::vector<int64_t>>& strides = iter.iter_strides();  // [dim][operand] bytes, 0: dst
  const int64_t ndim = static_cast<int64_t>(sizes.size()), inner = sizes[0];
  const int64_t rows = iter.numel() / inner;
  char* dst = static_cast<char*>(iter.operand(0).data_ptr());
  const char* src = static_cast<const char*>(iter.operand(1).data_ptr());
  const int64_t ds = strides[0][0], ss = strides[0][1];
  const bool dense = ds == sizeof(E) && ss == sizeof(E);
  parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / inner), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(static_cast<size_t>(ndim), 0);
    char* d = dst;
    const char* s = src;
    int64_t rem = begin;
    for (int64_t k = 1; k < ndim; ++k) {
      idx[k] = rem % sizes[k];
      rem /= sizes[k];
      d += idx[k] * strides[k][0];
      s += idx[k] * strides[k][1];
    }
    for (int64_t r = begin; r < end; ++r) {
      if (dense) {
        E* o = reinterpret_cast<E*>(d);
        const E* i = reinterpret_cast<const E*>(s);
        for (int64_t j = 0; j < inner; ++j) o[j] = i[j];
      } else {
        for (int64_t j = 0; j < inner; ++j) std::memcpy(d + j * ds, s + j * ss, sizeof(E));
      }
      for (int64_t k = 1; k < ndim; ++k) {  // the next row
        d += strides[k][0];
        s += strides[k][1];
        if (++idx[k] < sizes[k]) break;
        d -= sizes[k] * strides[k][0];
        s -= sizes[k] * strides[k][1];
        idx[k] = 0;
      }
    }
  });
}

bool copy_same_dtype(const TensorIterator& iter, DType dtype) {
  if (iter.ntensors() != 2 || iter.iter_sizes().empty()) return false;
  switch (element_size(dtype)) {
    case 1: copy_rows<uint8_t>(iter); return true;
    case 2: copy_rows<uint16_t>(iter); return true;
    case 4: copy_rows<uint32_t>(iter); return true;
    case 8: copy_rows<uint64_t>(iter); return true;
    default: return false;
  }
}

namespace {
void copy_values_cpu(Tensor& dst, const Tensor& src_in) {
  if (dst.numel() == 0) return;
  Tensor src = src_in;
  if (src.sizes() != dst.sizes()) {  // broadcasts (copy_'s front checked that it can)
    src = expand(src, dst.sizes());
  }
  if (dst.impl()->storage() == src.impl()->storage()) {
    if (same_geometry(dst, src) && dst.dtype() == src.dtype()) return;
    src = clone(src);  // overlapping views: read from a snapshot
  }
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    parallel_memcpy(static_cast<char*>(dst.data_ptr()), static_cast<const char*>(src.data_ptr()), dst.nbytes());
    return;
  }
  IteratorConfig config;
  config.op = "copy_";
  config.compute_dtype = src.dtype();
  config.output_dtype = dst.dtype();
  TensorIterator iter(config, dst, {src});
  if (dst.dtype() == src.dtype() && iter.operand(0).is_same(dst) && copy_same_dtype(iter, dst.dtype())) return;
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
}
}  // namespace

// Every copy_ is a write: dst's version moves on (whichever path copies the values, also none), so autograd
// refuses a backward that saved dst before it (PyTorch's "modified by an inplace operation").
Tensor& copy_cpu(Tensor& dst, const Tensor& src_in) {
  TR_CHECK(src_in.device().is_cpu(), NotImplementedError, "copy_: copying from {} to cpu needs the CUDA backend",
           src_in.device().str());
  copy_values_cpu(dst, src_in);
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
