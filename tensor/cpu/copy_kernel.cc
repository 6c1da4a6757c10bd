// CPU copy_ (any strides, any dtypes, broadcasting src) and fill_.
#include <immintrin.h>

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

// float32 <-> float16 runs through the CPU's conversion instructions (F16C, on every AVX2 CPU: round to
// nearest even, NaNs quiet with their top payload bits, as Half's own conversion), 8 at a time.
__attribute__((target("f16c"))) void floats_to_halves(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = Half(in[i]).bits;
}

__attribute__((target("f16c"))) void halves_to_floats(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = Half::to_float(in[i]);
}

// A contiguous float32 <-> float16 copy in runs as above: the per-element conversion is a branchy
// bit-twiddle the compiler cannot vectorize (img.half() of 32x3x224x224: 2.8 ms, PyTorch 1.13: 0.6). False
// for other copies, or where this CPU lacks F16C.
bool copy_half_float(Tensor& dst, const Tensor& src) {
  static const bool has_f16c = __builtin_cpu_supports("f16c");
  const bool to_half = dst.dtype() == DType::Float16 && src.dtype() == DType::Float32;
  const bool to_float = dst.dtype() == DType::Float32 && src.dtype() == DType::Float16;
  if (!has_f16c || !(to_half || to_float) || !dst.is_contiguous() || !src.is_contiguous()) return false;
  parallel_for(0, dst.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    if (to_half)
      floats_to_halves(src.data<float>() + b, static_cast<uint16_t*>(dst.data_ptr()) + b, e - b);
    else
      halves_to_floats(static_cast<const uint16_t*>(src.data_ptr()) + b, dst.data<float>() + b, e - b);
  });
  return true;
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
  const bool broadcast = ds == sizeof(E) && ss == 0;  // (an expanded row: one value written along it)
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
      } else if (broadcast) {
        E v;
        std::memcpy(&v, s, sizeof(E));
        E* o = reinterpret_cast<E*>(d);
        for (int64_t j = 0; j < inner; ++j) o[j] = v;
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

// An 8x8 block of 4-byte elements transposed in registers: src's rows (ld_src bytes apart) become dst's
// columns (dst's rows ld_dst bytes apart).
inline void transpose_8x8(const char* src, int64_t ld_src, char* dst, int64_t ld_dst) {
  __m256 r[8], t[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + j * ld_src));
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + j * ld_dst), _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + (j + 4) * ld_dst), _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
  }
}

// A transposing copy (a transpose's or a channels-last permute's contiguous()): the destination is dense along
// the iterator's dim 0 and the source along another dim k, so a row by row copy reads one element per cache
// line, and a row of a big tensor has moved every line out of the cache before the next row could use the
// rest (a 1M-element transpose took 1.2 ms). Copied in kTile x kTile tiles instead, whose lines stay in the
// cache until every element of them is used; 4-byte elements go 8x8 at a time through registers. False when
// the layouts are not of that kind.
template <typename E>
bool copy_tiles(const TensorIterator& iter) {
  constexpr int64_t kTile = 32, esize = static_cast<int64_t>(sizeof(E));
  const IntList& sizes = iter.iter_sizes();                                // innermost first
  const std::vector<std::vector<int64_t>>& strides = iter.iter_strides();  // [dim][operand] bytes, 0: dst
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  if (ndim < 2 || strides[0][0] != esize || strides[0][1] == esize) return false;
  int64_t k = 1;
  while (k < ndim && strides[k][1] != esize) ++k;
  if (k == ndim || sizes[0] < 8 || sizes[k] < 8) return false;  // (narrow: row by row is as good)
  const int64_t n0 = sizes[0], nk = sizes[k], dk = strides[k][0], s0 = strides[0][1];
  const int64_t tiles_k = (nk + kTile - 1) / kTile, outer = iter.numel() / (n0 * nk);
  char* dst = static_cast<char*>(iter.operand(0).data_ptr());
  const char* src = static_cast<const char*>(iter.operand(1).data_ptr());
  parallel_for(0, outer * tiles_k, std::max<int64_t>(1, kElementwiseGrain / (kTile * n0)), [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      int64_t rem = w / tiles_k;  // the other dims' index, innermost first
      char* d = dst;
      const char* s = src;
      for (int64_t j = 1; j < ndim; ++j) {
        if (j == k) continue;
        const int64_t i = rem % sizes[j];
        rem /= sizes[j];
        d += i * strides[j][0];
        s += i * strides[j][1];
      }
      const int64_t k0 = (w % tiles_k) * kTile, k1 = std::min(nk, k0 + kTile);
      for (int64_t i0 = 0; i0 < n0; i0 += kTile) {
        const int64_t i1 = std::min(n0, i0 + kTile);
        int64_t kk = k0;
        if constexpr (esize == 4) {  // whole 8x8 blocks, then the tile's ragged edges below
          for (; kk + 8 <= k1; kk += 8) {
            int64_t i = i0;
            for (; i + 8 <= i1; i += 8) transpose_8x8(s + i * s0 + kk * esize, s0, d + kk * dk + i * esize, dk);
            for (int64_t r = kk; r < kk + 8; ++r)
              for (int64_t c = i; c < i1; ++c) std::memcpy(d + r * dk + c * esize, s + c * s0 + r * esize, esize);
          }
        }
        for (; kk < k1; ++kk)
          for (int64_t c = i0; c < i1; ++c) std::memcpy(d + kk * dk + c * esize, s + c * s0 + kk * esize, esize);
      }
    }
  });
  return true;
}

bool copy_same_dtype(const TensorIterator& iter, DType dtype) {
  if (iter.ntensors() != 2 || iter.iter_sizes().empty()) return false;
  switch (element_size(dtype)) {
    case 1: if (!copy_tiles<uint8_t>(iter)) copy_rows<uint8_t>(iter); return true;
    case 2: if (!copy_tiles<uint16_t>(iter)) copy_rows<uint16_t>(iter); return true;
    case 4: if (!copy_tiles<uint32_t>(iter)) copy_rows<uint32_t>(iter); return true;
    case 8: if (!copy_tiles<uint64_t>(iter)) copy_rows<uint64_t>(iter); return true;
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
  if (copy_half_float(dst, src)) return;
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
