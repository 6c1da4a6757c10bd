#pragma once
// Helpers the Gloo backend's files share: contiguous staging buffers for
// tensors of any layout, their bytes, strided element ranges copied out, AVG's final division, and the
// argument checks every collective and point-to-point call makes.
#include <string>

#include "tensor/ops.h"

namespace trainrun {
namespace c10d {

inline Tensor contiguous_buffer(const Tensor& t) { return t.is_contiguous() ? t : contiguous(t); }

inline void copy_back(const Tensor& dst, const Tensor& buffer) {
  if (dst.impl() == buffer.impl()) return;
  Tensor d = dst;
  copy_(d, buffer);
}

inline char* bytes_of(const Tensor& t) { return static_cast<char*>(t.data_ptr()); }

// AVG divides the sum by the group size (truncating for integers, as NCCL).
inline void finish_average(Tensor& buffer, int size) {
  if (is_floating(buffer.dtype())) {
    div_(buffer, static_cast<double>(size));
  } else {
    Tensor q = div(buffer, scalar_tensor(size, buffer.dtype()), "trunc");
    copy_(buffer, q);
  }
}

// Copies elements [e0, e1) of t, in row-major order, into contiguous memory at `to`, whatever t's strides
// (the shared-memory all-to-all packs strided chunks straight into its segment with it).
void copy_elements(const Tensor& t, int64_t e0, int64_t e1, char* to);

inline void check_cpu(const Tensor& t, const char* op, const std::string& group, const char* what) {
  TR_CHECK(t.defined(), ValueError, "{} on group '{}': {} is an undefined tensor", op, group, what);
  TR_CHECK(t.device().is_cpu(), ValueError, "{} on group '{}' (gloo): {} is on {}; the gloo backend takes CPU tensors",
           op, group, what, t.device().str());
}

inline void check_like(const Tensor& t, const Tensor& like, const char* op, const std::string& group,
                       const char* what) {
  check_cpu(t, op, group, what);
  TR_CHECK(t.dtype() == like.dtype() && t.sizes() == like.sizes(), ValueError,
           "{} on group '{}': {} is {} {} but must match the input's {} {}", op, group, what, dtype_name(t.dtype()),
           t.shape_str(), dtype_name(like.dtype()), like.shape_str());
}

}  // namespace c10d
}  // namespace trainrun
