#pragma once
// Shared set-up of reductions on every device: the input is laid out as a contiguous
// [outer, inner] matrix whose rows are the reduced elements of one output
// element (a transposing copy only when the reduced dims are not innermost).
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

struct ReducePlan {
  Tensor rows;          // contiguous, numel == outer * inner
  int64_t outer = 1;    // number of output elements
  int64_t inner = 1;    // elements reduced into each
  IntList out_shape;    // with keepdim applied
  // Builds the plan; `dims` empty means all dims. Throws IndexError for a bad
  // or repeated dim, naming `op`.
  ReducePlan(const Tensor& x, const IntList& dims, bool keepdim, const char* op);
};

// The result dtype of sum/prod/cumsum: the requested one, else the input's
// when floating, else int64 (PyTorch's rule).
DType sum_dtype(DType in, std::optional<DType> requested);
// Which of nd dims `dims` reduce (negative dims wrapped), or nullopt for a bad or repeated dim: for the fast
// paths that fall back to the plan, which then reports the error.
std::optional<std::vector<bool>> reduced_dims(int64_t nd, const IntList& dims);
// Throws IndexError naming `op` when a reduction without an identity (max,
// argmax, ...) would reduce over nothing.
void check_nonempty(const ReducePlan& plan, const char* op);

}  // namespace trainrun
