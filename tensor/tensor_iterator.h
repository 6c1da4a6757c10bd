#pragma once
// The one broadcasting iterator behind every elementwise kernel (like
// PyTorch's TensorIterator). It promotes the inputs to a common dtype,
// broadcasts their shapes, allocates or checks the output, and walks all
// operands together, handing the kernel runs along the innermost dim:
//   loop(char** data, const int64_t* byte_strides, int64_t n)
// where operand 0 is the output. Dims are reordered and coalesced so that a
// contiguous case becomes one long run, and runs are split across threads.
#include <optional>
#include <vector>

#include "tensor/function_ref.h"
#include "tensor/tensor.h"

namespace trainrun {

using ElementwiseLoop = FunctionRef<void(char** data, const int64_t* strides, int64_t n)>;

struct IteratorConfig {
  const char* op = "elementwise";
  // Integer/bool inputs compute in the default float dtype (exp, div, ...).
  bool promote_integer_to_float = false;
  // The output dtype when it is not the compute dtype (comparisons: Bool).
  std::optional<DType> output_dtype;
  // Compute in this dtype whatever the inputs are (e.g. logical ops: Bool).
  std::optional<DType> compute_dtype;
  // The first N inputs keep their dtype and take no part in promotion
  // (where's condition).
  int inputs_keeping_dtype = 0;
  // In-place ops (fill_): the shape is out's, and inputs broadcast to it
  // (a 0-dim value fills the whole of out) instead of setting it.
  bool shape_from_output = false;
};

class TensorIterator {
 public:
  // `out` may be undefined (a new tensor is allocated). After for_each,
  // output() is the result; when `out` had another dtype than the op
  // produces, the result is computed in a temporary and copied into it.
  TensorIterator(const IteratorConfig& config, const Tensor& out, std::vector<Tensor> inputs);

  DType compute_dtype() const { return compute_dtype_; }
  DType output_dtype() const { return result_.dtype(); }
  int64_t numel() const { return numel_; }
  const IntList& shape() const { return shape_; }
  int ntensors() const { return static_cast<int>(operands_.size()); }
  // Input i after promotion (0-dim wrapped numbers included).
  const Tensor& input(int i) const { return operands_[i + 1]; }
  bool is_scalar_input(int i) const { return operands_[i + 1].numel() == 1 && operands_[i + 1].dim() == 0; }

  // The coalesced iteration space, for device loops (tensor/cuda/): sizes
  // innermost first, byte strides [dim][operand], operand 0 the output.
  const IntList& iter_sizes() const { return iter_sizes_; }
  const std::vector<std::vector<int64_t>>& iter_strides() const { return iter_strides_; }
  const Tensor& operand(int i) const { return operands_[i]; }

  // Runs loop over every element (in parallel above kElementwiseGrain).
  void for_each(ElementwiseLoop loop, int64_t grain = -1);
  // Finishes the op: copies into a caller's out of another dtype, returns it.
  Tensor output();

 private:
  bool flat_run();
  void build_strides();
  IteratorConfig config_;
  DType compute_dtype_;
  Tensor user_out_;   // what the caller passed (may be undefined)
  Tensor result_;     // what the kernel writes
  std::vector<Tensor> operands_;  // result_ then inputs (promoted)
  IntList shape_;
  int64_t numel_ = 0;
  // After reordering/coalescing: sizes innermost-first and byte strides
  // [dim][operand].
  IntList iter_sizes_;
  std::vector<std::vector<int64_t>> iter_strides_;
};

}  // namespace trainrun
