// CPU gather/scatter family, index_select and index_add, masked_select and
// nonzero. Index tensors may be int64 or int32; every index is bounds-checked
// with an error naming the op, the index and the dim size.
#include <cstring>

#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

Tensor int64_index(const Tensor& index, const char* op) {
  TR_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, TypeError,
           "{}: index must be int64 or int32, got {}", op, dtype_name(index.dtype()));
  return contiguous(index.to(DType::Int64));
}

int64_t checked_index(int64_t i, int64_t size, const char* op, int64_t dim) {
  TR_CHECK(i >= -size && i < size, IndexError, "{}: index {} is out of bounds for dim {} with size {}", op, i, dim, size);
  return i < 0 ? i + size : i;
}

// index_select along the last dim (a flip's, a permutation of features): out[o][i] = x[o][rows[i]], as typed
// loads and stores, where a memcpy call and a division per element cost 2.3 ns of them (flip(-1) of a batch of
// images: 11 ms, PyTorch 1.5).
template <typename E>
void select_elements(const char* src_bytes, char* dst_bytes, const int64_t* rows, int64_t outer, int64_t n,
                     int64_t size) {
  const E* src = reinterpret_cast<const E*>(src_bytes);
  E* dst = reinterpret_cast<E*>(dst_bytes);
  bool reversed = n == size;  // (every row backwards: a flip, whose loop the compiler vectorizes)
  for (int64_t i = 0; reversed && i < n; ++i) reversed = rows[i] == size - 1 - i;
  parallel_for(0, outer, std::max<int64_t>(1, kElementwiseGrain / n), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const E* s = src + o * size;
      E* d = dst + o * n;
      if (reversed) {
        for (int64_t i = 0; i < n; ++i) d[i] = s[n - 1 - i];
      } else {
        for (int64_t i = 0; i < n; ++i) d[i] = s[rows[i]];
      }
    }
  });
}

Tensor index_select_cpu(const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  TR_CHECK(index_in.dim() <= 1, ValueError, "index_select: index must be 0-D or 1-D, got shape {}", index_in.shape_str());
  dim = wrap_dim(dim, x_in.dim(), "index_select");
  Tensor index = int64_index(index_in, "index_select");
  Tensor x = contiguous(x_in);
  const int64_t n = index.numel();
  const int64_t size = x.dim() == 0 ? 1 : x.size(dim);
  IntList shape = x.sizes();
  if (x.dim() > 0) shape[dim] = n;
  Tensor out = empty(shape, TensorOptions(x.dtype(), x.device()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t row_bytes = inner * x.element_size();
  const int64_t* idx = index.data<int64_t>();
  std::vector<int64_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = checked_index(idx[i], size, "index_select", dim);
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  if (inner == 1 && n > 0) {  // the last dim selected: typed element loads
    switch (x.element_size()) {
      case 1: select_elements<uint8_t>(src, dst, rows.data(), outer, n, size); return out;
      case 2: select_elements<uint16_t>(src, dst, rows.data(), outer, n, size); return out;
      case 4: select_elements<uint32_t>(src, dst, rows.data(), outer, n, size); return out;
      case 8: select_elements<uint64_t>(src, dst, rows.data(), outer, n, size); return out;
      default: break;
    }
  }
  parallel_for(0, outer * n, std::max<int64_t>(1, 65536 / std::max<int64_t>(row_bytes, 1)), [&](int64_t b, int64_t e) {
    int64_t o = b / n, i = b % n;
    for (int64_t p = b; p < e; ++p) {
      std::memcpy(dst + p * row_bytes, src + (o * size + rows[i]) * row_bytes, row_bytes);
      if (++i == n) {
        i = 0;
        ++o;
      }
    }
  });
  return out;
}

// Whether x (and src) are contiguous and the index covers x in every dim but `dim` (and src has the index's
// shape): offsets are then linear in the index's position.
bool dense_along_index(const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src) {
  if (!x.is_contiguous() || !index.is_contiguous() || (src && (!src->is_contiguous() || src->sizes() != index.sizes())))
    return false;
  for (int64_t d = 0; d < index.dim(); ++d)
    if (d != dim && index.size(d) != x.size(d)) return false;
  return true;
}

// Calls f(x_offset, src_offset) (in elements of their storages) for every
// element of `index` (shape-checked against x and, when given, src).
template <typename F>
void for_each_indexed(const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src, const char* op, F f) {
  TR_CHECK(index.dim() == x.dim() || (x.dim() == 0 && index.dim() <= 1), ValueError,
           "{}: index (shape {}) must have as many dims as the input (shape {})", op, index.shape_str(), x.shape_str());
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d != dim)
      TR_CHECK(index.size(d) <= x.size(d), ValueError, "{}: index shape {} exceeds input shape {} at dim {}", op,
               index.shape_str(), x.shape_str(), d);
    if (src)
      TR_CHECK(index.size(d) <= src->size(d), ValueError, "{}: index shape {} exceeds src shape {} at dim {}", op,
               index.shape_str(), src->shape_str(), d);
  }
  const int64_t* idx = index.data<int64_t>();
  const int64_t nd = index.dim();
  const int64_t size = x.dim() == 0 ? 1 : x.size(dim);
  if (nd > 0 && dense_along_index(x, dim, index, src)) {
    // Rows of `inner` elements: one multiply-add per element instead of a walk over every dim (max_pool2d's
    // backward scattered 1M gradients in 51 ms that way). Each outer slice touches its own part of x, so
    // slices run in parallel; within one, elements keep their order (scatter's last write wins, sums add in
    // order).
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= index.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= index.size(d);
    const int64_t n = index.size(dim);
    const int64_t x0 = x.storage_offset(), s0 = src ? src->storage_offset() : 0;
    parallel_for(0, outer, std::max<int64_t>(1, 32768 / std::max<int64_t>(n * inner, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (int64_t j = 0; j < n; ++j) {
          const int64_t p = (o * n + j) * inner;
          for (int64_t k = 0; k < inner; ++k) f(x0 + (o * size + checked_index(idx[p + k], size, op, dim)) * inner + k,
                                               s0 + p + k);
        }
    });
    return;
  }
  std::vector<int64_t> coord(nd, 0);
  for (int64_t p = 0; p < index.numel(); ++p) {
    int64_t i = checked_index(idx[p], size, op, dim);
    int64_t xo = x.storage_offset(), so = src ? src->storage_offset() : 0;
    for (int64_t d = 0; d < nd; ++d) {
      xo += (d == dim ? i : coord[d]) * x.stride(d);
      if (src) so += coord[d] * src->stride(d);
    }
    f(xo, so);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++coord[d] < index.size(d)) break;
      coord[d] = 0;
    }
  }
}

Tensor gather_cpu(const Tensor& x, int64_t dim, const Tensor& index_in) {
  dim = wrap_dim(dim, x.dim(), "gather");
  Tensor index = int64_index(index_in, "gather");
  Tensor out = empty(index.sizes(), TensorOptions(x.dtype(), x.device()));
  visit_dtype(x.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    const T* base = static_cast<const T*>(x.impl()->storage()->data());
    T* dst = out.data<T>();
    if (index.dim() > 0 && dim == index.dim() - 1 && dense_along_index(x, dim, index, &out)) {
      // Along the last dim (a loss's labels, top-k's picks): a row of the index picks from one row of x, in a
      // plain loop. Through for_each_indexed's per-element callback it cost 6.7 ns an element (PyTorch: 0.9).
      const int64_t n = index.size(dim), size = x.size(dim), rows = index.numel() / std::max<int64_t>(n, 1);
      const int64_t* idx = index.data<int64_t>();
      const T* x0 = base + x.storage_offset();
      const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
      parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const T* row = x0 + r * size;
          const int64_t* picks = idx + r * n;
          T* o = dst + r * n;
          for (int64_t j = 0; j < n; ++j) o[j] = row[checked_index(picks[j], size, "gather", dim)];
        }
      });
      return;
    }
    // (out, contiguous in the index's shape, stands as the "src" whose offsets are the output positions)
    for_each_indexed(x, dim, index, &out, "gather", [&](int64_t xo, int64_t position) { dst[position] = base[xo]; });
  });
  return out;
}

enum class ScatterMode { Assign, Add };

Tensor scatter_cpu(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src_in, int64_t mode_int) {
  ScatterMode mode = static_cast<ScatterMode>(mode_int);
  const char* op = mode == ScatterMode::Add ? "scatter_add" : "scatter";
  dim = wrap_dim(dim, x.dim(), op);
  Tensor index = int64_index(index_in, op);
  Tensor out = clone(x);
  Tensor src = src_in.dim() == 0 ? expand(src_in.to(x.dtype()), index.sizes()) : src_in.to(x.dtype());
  visit_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.impl()->storage()->data());
    const T* s = static_cast<const T*>(src.impl()->storage()->data());
    for_each_indexed(out, dim, index, &src, op, [&](int64_t xo, int64_t so) {
      if (mode == ScatterMode::Add) {
        if constexpr (std::is_same<T, bool>::value) o[xo] = o[xo] || s[so];
        else o[xo] = static_cast<T>(static_cast<opmath_t<T>>(o[xo]) + static_cast<opmath_t<T>>(s[so]));
      } else {
        o[xo] = s[so];
      }
    });
  });
  return out;
}

Tensor index_add_cpu(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src, const Scalar& alpha) {
  dim = wrap_dim(dim, x.dim(), "index_add");
  Tensor index = int64_index(index_in, "index_add");
  TR_CHECK(index.dim() == 1, ValueError, "index_add: index must be 1-D, got shape {}", index.shape_str());
  TR_CHECK(src.dim() == x.dim() && src.size(dim) == index.numel(), ValueError,
           "index_add: src of shape {} must match input shape {} with {} entries along dim {}", src.shape_str(),
           x.shape_str(), index.numel(), dim);
  Tensor out = clone(x);
  const int64_t* idx = index.data<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t row = checked_index(idx[i], x.size(dim), "index_add", dim);
    Tensor dst = narrow(out, dim, row, 1);
    add_(dst, narrow(src, dim, i, 1), alpha);
  }
  return out;
}

Tensor masked_select_cpu(const Tensor& x, const Tensor& mask) {
  TR_CHECK(mask.dtype() == DType::Bool, TypeError, "masked_select: mask must be bool, got {}", dtype_name(mask.dtype()));
  IntList shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_select");
  Tensor xs = contiguous(expand(x, shape)), ms = contiguous(expand(mask, shape));
  const bool* m = ms.data<bool>();
  int64_t count = 0;
  for (int64_t i = 0; i < ms.numel(); ++i) count += m[i];
  Tensor out = empty({count}, TensorOptions(x.dtype(), x.device()));
  const int64_t es = x.element_size();
  const char* src = static_cast<const char*>(xs.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0, j = 0; i < ms.numel(); ++i)
    if (m[i]) std::memcpy(dst + (j++) * es, src + i * es, es);
  return out;
}

// The coordinates of every nonzero element, in row-major order. The flat range goes in fixed chunks: each
// chunk's count (in parallel), their running offsets, then each chunk writes its rows from its offset, a
// run of the last dim at a time. The element-by-element loop with an odometer step per element took 12 ns an
// element (4M bools: 49 ms, PyTorch 1.13: 8).
Tensor nonzero_cpu(const Tensor& x_in) {
  Tensor x = contiguous(x_in.to(DType::Bool));
  const bool* p = x.data<bool>();
  const int64_t nd = x.dim(), n = x.numel();
  if (nd == 0) return empty({p[0] ? 1 : 0, 0}, DType::Int64);
  constexpr int64_t kChunk = 1 << 16;
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  std::vector<int64_t> offset(static_cast<size_t>(nchunks + 1), 0);
  parallel_for(0, nchunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t count = 0;
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) count += p[i];
      offset[c + 1] = count;
    }
  });
  for (int64_t c = 0; c < nchunks; ++c) offset[c + 1] += offset[c];
  Tensor out = empty({offset[nchunks], nd}, DType::Int64);
  int64_t* o = out.data<int64_t>();
  const IntList& sizes = x.sizes();
  const int64_t last = sizes[nd - 1];
  parallel_for(0, nchunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<int64_t> coord(static_cast<size_t>(nd));
    for (int64_t c = c0; c < c1; ++c) {
      int64_t i = c * kChunk;
      const int64_t end = std::min(n, i + kChunk);
      for (int64_t d = nd - 1, rem = i; d >= 0; --d) {  // the chunk's first coordinates
        coord[d] = rem % sizes[d];
        rem /= sizes[d];
      }
      int64_t* row = o + offset[c] * nd;
      while (i < end) {
        const int64_t run = std::min(end - i, last - coord[nd - 1]);  // (what is left of this last-dim run)
        for (int64_t k = 0; k < run; ++k) {
          if (!p[i + k]) continue;
          for (int64_t d = 0; d + 1 < nd; ++d) row[d] = coord[d];
          row[nd - 1] = coord[nd - 1] + k;
          row += nd;
        }
        i += run;
        coord[nd - 1] += run;
        for (int64_t d = nd - 1; d > 0 && coord[d] == sizes[d]; --d) {  // the next run: carry
          coord[d] = 0;
          ++coord[d - 1];
        }
      }
    }
  });
  return out;
}

OpKernel<ops::index_select> reg_index_select(DispatchKey::CPU, &index_select_cpu);
OpKernel<ops::gather> reg_gather(DispatchKey::CPU, &gather_cpu);
OpKernel<ops::scatter> reg_scatter(DispatchKey::CPU, &scatter_cpu);
OpKernel<ops::index_add> reg_index_add(DispatchKey::CPU, &index_add_cpu);
OpKernel<ops::masked_select> reg_masked_select(DispatchKey::CPU, &masked_select_cpu);
OpKernel<ops::nonzero> reg_nonzero(DispatchKey::CPU, &nonzero_cpu);

}  // namespace
}  // namespace trainrun
