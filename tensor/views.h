#pragma once
// Ops that return views sharing storage with their input (no copy), plus
// contiguous/clone/copy_/to, which copy.
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

// Same data, new shape; one size may be -1. Throws if the strides cannot
// express it (use reshape).
Tensor view(const Tensor& x, const IntList& sizes);
// view when possible, otherwise a contiguous copy.
Tensor reshape(const Tensor& x, const IntList& sizes);
Tensor permute(const Tensor& x, const IntList& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
// Transpose of a tensor with at most 2 dims.
Tensor t(const Tensor& x);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// Removes `dim`, keeping index `index` of it.
Tensor select(const Tensor& x, int64_t dim, int64_t index);
// x[start:end:step] along dim (Python slice semantics, step > 0).
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step = 1);
// Broadcasts size-1 dims (and new leading dims) to `sizes`; -1 keeps a size.
Tensor expand(const Tensor& x, const IntList& sizes);
Tensor expand_as(const Tensor& x, const Tensor& other);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, const IntList& sizes);
Tensor as_strided(const Tensor& x, const IntList& sizes, const IntList& strides,
                  std::optional<int64_t> storage_offset = std::nullopt);
// `chunks` pieces (the last may be smaller) along dim.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// Pieces of split_size along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const IntList& sizes, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// A new handle on the same data and geometry (detach builds on it).
Tensor alias(const Tensor& x);

Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
// Copies src into dst (broadcasting src, converting dtype, any strides).
Tensor& copy_(Tensor& dst, const Tensor& src);
Tensor to(const Tensor& x, DType dtype, bool copy = false);
// x on `device`, in `dtype` when given. non_blocking lets a copy between a GPU
// and pinned CPU memory return before it completes.
Tensor to(const Tensor& x, Device device, std::optional<DType> dtype = std::nullopt, bool non_blocking = false,
          bool copy = false);
// copy_ whose cross-device copy may return early (see to()).
Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking);
// True inside a copy_(..., non_blocking=true): device kernels read it to
// decide whether to wait for the copy.
bool copy_is_non_blocking();
Tensor& fill_(Tensor& x, const Scalar& v);
Tensor& zero_(Tensor& x);

// Broadcast shape of a and b; throws ValueError naming `op` and both shapes.
IntList broadcast_shapes(const IntList& a, const IntList& b, const char* op);

}  // namespace trainrun
