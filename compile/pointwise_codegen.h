#pragma once
// C++ for fused loops: each pointwise op the fuser knows becomes AVX2 vector
// code on 8 floats at a time (the transcendental ones call the same SLEEF
// kernels as the eager ops, so they round alike), with a masked tail.
//
// A loop walks its values as rows x cols. Reductions join it: along each
// row (sum, mean, amax over trailing dims: one value per row, which later
// steps of the same loop read broadcast over the row, as softmax's backward
// reads sum(g * y)) or down each column (sum, mean over leading dims: a
// bias's gradient). A row is then walked once per "phase": a step whose
// operands need a row reduction runs in the pass after the one that
// finishes it; values a later pass reads are kept in a row-sized scratch
// buffer (in L1) instead of being recomputed.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compile/captured_graph.h"
#include "compile/fused_kernel.h"

namespace trainrun::compile {

// What a step's result is inside the loop: 8 floats, or a comparison's 8 lanes of all-ones or zeros.
enum class LaneType { Float, Mask };

// What a reduction step computes (None: the step is pointwise).
enum class Reduction : uint8_t {
  None,
  RowSum,     // sum along each row (over the columns): one value per row
  RowMax,     // max along each row (amax; NaN wins, as eager's)
  ColumnSum,  // sum down each column (over the rows): one value per column
};

// Whether the node is a pointwise op this file has code for, with constant
// arguments it can take (a non-default `out` is not); *result says what
// its result is. Its tensor operands are the Value slots, in order.
bool is_fusable_pointwise(const CapturedGraph::Node& node, LaneType* result);
// The lane types the op's tensor operands must have.
std::vector<LaneType> operand_lane_types(const CapturedGraph::Node& node);
// The names of the pointwise ops fused loops have code for (every device's generator covers them all).
std::vector<std::string> fusable_op_names();

// A pointwise node's non-tensor arguments after its operands (alpha, approximate, ...), in order.
std::vector<const IValue*> loop_op_constants(const CapturedGraph::Node& node);
// A finite number as a C++/CUDA float literal ("2.0f", "1e-05f").
std::string float_literal(double v);
// A Scalar, float or int constant as a double; nullopt for other kinds.
std::optional<double> loop_scalar_constant(const IValue& v);
// The op's first constant as a finite number (alpha, value), 1 when it has none; nullopt when it is not one.
std::optional<double> loop_multiplier(const std::vector<const IValue*>& constants);
// GELU's `approximate` ("none" or "tanh"); nullopt for anything else.
std::optional<std::string> loop_gelu_approximate(const std::vector<const IValue*>& constants);

// One generated loop: its inputs (values read from outside, by kind), its
// steps (nodes in order, operands and result as value ids) and the values it writes out.
struct LoopPlan {
  struct Step {
    const CapturedGraph::Node* node;
    std::vector<int> operands;
    int result;
    // copy_ into a fresh float tensor (a cast, as Tensor::to makes it): from a mask (1.0 or 0.0) or a float.
    bool cast = false;
    bool cast_from_mask = false;
    Reduction reduction = Reduction::None;
    // A mean: the sum times 1 / count, the count being the loop's cols (a row reduction) or rows (a column
    // one), read at run time so that a loop's source does not depend on sizes (an export with dynamic shapes).
    bool mean = false;
    // The pass over each row that computes it: one more than the last row
    // reduction it depends on finished in.
    int phase = 0;
  };
  std::vector<int> inputs;
  std::vector<FusedKernel::InputKind> input_kinds;
  // Per input: a number on the CPU that a device's loop reads (passed to its kernel by value, not copied over).
  std::vector<char> host_scalar;
  std::vector<Step> steps;
  std::vector<int> outputs;
};

// What a generator needs to know of a plan's values, gathered once (every device's generator reads it).
struct LoopLayout {
  std::map<int, size_t> input_of, output_of;     // value -> index into the inputs / outputs
  std::map<int, const LoopPlan::Step*> step_of;  // value -> the step making it
  std::map<int, size_t> row_reduction_of;        // value -> its index among the row reductions
  std::map<int, size_t> column_reduction_of;     // value -> its index among the column sums
  std::map<int, size_t> scratch_of;  // a value a later phase reads, kept per row (outputs are read back instead)
  std::map<int, bool> is_mask;       // a step's result that is a comparison's
  int phases = 1;

  explicit LoopLayout(const LoopPlan& plan);
  bool reduces() const { return !row_reduction_of.empty() || !column_reduction_of.empty(); }
};

// The source of extern "C" `name` (FusedKernel::Fn) for one plan.
std::string loop_source(const std::string& name, const LoopPlan& plan);
// What every generated file starts with (includes, load and store helpers).
std::string loops_prelude();

}  // namespace trainrun::compile
