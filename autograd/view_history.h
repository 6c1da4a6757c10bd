#pragma once
// In-place writes through views, as PyTorch's autograd handles them. A view
// made while autograd records remembers the tensor whose storage it reads (its
// root base). A write through the view (copy_, fill_, an op's in-place form)
// rebases the root's history (CopySlices: the root's gradient passes through,
// except at the written elements, whose gradient goes to what was written),
// and a view whose root was written since its own history was set gets a
// history through the root anew (AsStridedBackward) when it is next used.
#include <functional>

#include "tensor/tensor.h"

namespace trainrun {

// Where a tensor's elements sit in its storage.
struct Geometry {
  IntList sizes, strides;
  int64_t offset;
};
// as_strided's backward: the gradient g of a view reading a storage of storage_numel elements through `view`,
// summed onto the positions it reads and read back through x's geometry (an equal part each where x itself
// repeats a position, as an expanded tensor does: the parts add back up in x's own backward, PyTorch's rule).
Tensor as_strided_backward(const Tensor& g, int64_t storage_numel, const Geometry& x, const Geometry& view,
                           DType x_dtype);

// Called by the view ops' autograd kernels on their output (recorded: it has a history) and their input.
void note_view(const Tensor& view, const Tensor& source);
// The root base of a recorded view; undefined for anything else.
Tensor view_base(const Tensor& t);
// view := src under autograd, for a recorded view: writes through `write` (which copies src's values into
// view below autograd), then gives the root the CopySlices history and the view one through the root.
void write_through_view(const Tensor& view, const Tensor& src, const std::function<void()>& write);
// A recorded view whose root was written since its history was set: its history through the root now
// (gradient_edge calls this, so every use of the view sees the current root).
void refresh_view_history(const Tensor& view);

}  // namespace trainrun
