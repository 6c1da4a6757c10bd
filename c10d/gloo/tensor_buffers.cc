#include "c10d/gloo/tensor_buffers.h"

#include <cstring>

namespace trainrun {
namespace c10d {

// Copies elements [e0, e1) of t, in row-major order, into contiguous memory at `to`: whole rows as one
// strided copy, a partial first or last row by recursing into it.
void copy_elements(const Tensor& t, int64_t e0, int64_t e1, char* to) {
  if (e0 >= e1) return;
  const int64_t elem = t.element_size();
  if (t.dim() == 0 || (e0 == 0 && e1 == t.numel())) {
    if (t.is_contiguous()) {
      std::memcpy(to, t.data_ptr(), static_cast<size_t>(t.numel() * elem));
    } else if (t.dim() == 2 && t.stride(1) == 1) {  // rows of contiguous elements: one memcpy per row
      const size_t row_bytes = static_cast<size_t>(t.size(1) * elem);
      const char* from = static_cast<const char*>(t.data_ptr());
      for (int64_t r = 0; r < t.size(0); ++r) std::memcpy(to + r * row_bytes, from + r * t.stride(0) * elem, row_bytes);
    } else {
      Tensor dst = from_blob(to, t.sizes(), contiguous_strides(t.sizes()), t.dtype());
      copy_(dst, t);
    }
    return;
  }
  const int64_t inner = t.numel() / t.size(0);
  if (e0 % inner != 0) {  // the rest of a started row
    const int64_t r = e0 / inner, end = std::min(e1, (r + 1) * inner);
    copy_elements(t.select(0, r), e0 - r * inner, end - r * inner, to);
    to += (end - e0) * elem;
    e0 = end;
  }
  const int64_t full_rows = e1 / inner - e0 / inner;
  if (e0 < e1 && full_rows > 0) {
    Tensor rows = t.narrow(0, e0 / inner, full_rows);
    copy_elements(rows, 0, rows.numel(), to);
    to += rows.numel() * elem;
    e0 += rows.numel();
  }
  if (e0 < e1) copy_elements(t.select(0, e0 / inner), 0, e1 - e0, to);  // the start of the last row
}

}  // namespace c10d
}  // namespace trainrun
