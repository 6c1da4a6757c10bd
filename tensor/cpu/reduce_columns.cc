#include "tensor/cpu/reduce_columns.h"

#include <algorithm>
#include <vector>

#include "tensor/reduce_plan.h"
#include "tensor/thread_pool.h"

namespace trainrun {
namespace {

// Work items: (block, a run of `width` columns), each with at least a grain of elements.
struct Split {
  int64_t width = 1, per_block = 1, grain = 1;
};

Split split_columns(const ColumnBlocks& b) {
  Split s;
  // Whole rows when there are blocks enough to share out (a row read in full streams from memory; a slice
  // of each row is a strided read), else slices of columns.
  s.width = b.outer >= 4 && b.inner <= 8192
                ? b.inner
                : std::min(b.inner, std::max<int64_t>(64, kElementwiseGrain / std::max<int64_t>(b.mid, 1)));
  s.width = std::max<int64_t>(s.width, 1);
  s.per_block = (b.inner + s.width - 1) / s.width;
  s.grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(b.mid * s.width, 1));
  return s;
}

template <typename T>
void sum_blocks(const ColumnBlocks& b, const T* x, T* out, double scale) {
  constexpr int64_t kRows = 128;
  const int64_t nblocks = std::max<int64_t>(1, (b.mid + kRows - 1) / kRows);
  const Split s = split_columns(b);
  parallel_for(0, b.outer * s.per_block, s.grain, [&](int64_t w0, int64_t w1) {
    std::vector<T> partial(static_cast<size_t>(nblocks * s.width));
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t o = w / s.per_block, c0 = (w % s.per_block) * s.width, n = std::min(b.inner, c0 + s.width) - c0;
      const T* block = x + o * b.mid * b.inner + c0;
      std::fill(partial.begin(), partial.begin() + nblocks * n, T(0));
      for (int64_t k = 0; k < nblocks; ++k) {
        T* acc = partial.data() + k * n;
        for (int64_t r = k * kRows; r < std::min(b.mid, (k + 1) * kRows); ++r) {
          const T* row = block + r * b.inner;
          for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
        }
      }
      for (int64_t width = 1; width < nblocks; width *= 2)
        for (int64_t k = 0; k + width < nblocks; k += 2 * width)
          for (int64_t j = 0; j < n; ++j) partial[k * n + j] += partial[(k + width) * n + j];
      T* o_row = out + o * b.inner + c0;
      for (int64_t j = 0; j < n; ++j) o_row[j] = scale == 1.0 ? partial[j] : static_cast<T>(partial[j] * scale);
    }
  });
}

template <typename T, bool is_max>
void extreme_blocks(const ColumnBlocks& b, const T* x, T* out) {
  const Split s = split_columns(b);
  parallel_for(0, b.outer * s.per_block, s.grain, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t o = w / s.per_block, c0 = (w % s.per_block) * s.width, n = std::min(b.inner, c0 + s.width) - c0;
      const T* block = x + o * b.mid * b.inner + c0;
      T* acc = out + o * b.inner + c0;
      std::copy(block, block + n, acc);
      for (int64_t r = 1; r < b.mid; ++r) {
        const T* row = block + r * b.inner;
        for (int64_t j = 0; j < n; ++j) {  // (a NaN taken stays: nothing compares above or below it)
          const T v = row[j];
          acc[j] = (is_max ? v > acc[j] : v < acc[j]) || v != v ? v : acc[j];
        }
      }
    }
  });
}

}  // namespace

std::optional<ColumnBlocks> column_blocks(const Tensor& x, const IntList& dims, bool keepdim) {
  return block_split(x, dims, keepdim, /*reduce_middle=*/true, /*outer_may_be_empty=*/true);
}

void sum_columns(const ColumnBlocks& b, const Tensor& x, const void* base, Tensor& out, double scale) {
  if (x.dtype() == DType::Float32)
    sum_blocks<float>(b, static_cast<const float*>(base), out.data<float>(), scale);
  else
    sum_blocks<double>(b, static_cast<const double*>(base), out.data<double>(), scale);
}

void extreme_columns(const ColumnBlocks& b, const Tensor& x, Tensor& out, bool is_max) {
  if (x.dtype() == DType::Float32) {
    if (is_max) extreme_blocks<float, true>(b, x.data<float>(), out.data<float>());
    else extreme_blocks<float, false>(b, x.data<float>(), out.data<float>());
  } else {
    if (is_max) extreme_blocks<double, true>(b, x.data<double>(), out.data<double>());
    else extreme_blocks<double, false>(b, x.data<double>(), out.data<double>());
  }
}

}  // namespace trainrun
