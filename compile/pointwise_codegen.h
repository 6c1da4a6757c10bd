#pragma once
// C++ for fused pointwise loops: each op the fuser knows becomes AVX2 vector
// code on 8 floats at a time (the transcendental ones call the same SLEEF
// kernels as the eager ops, so they round alike), with a masked tail.
#include <cstdint>
#include <string>
#include <vector>

#include "compile/captured_graph.h"
#include "compile/fused_kernel.h"

namespace trainrun::compile {

// What a step's result is inside the loop: 8 floats, or a comparison's 8 lanes of all-ones or zeros.
enum class LaneType { Float, Mask };

// Whether the node is a pointwise op this file has code for, with constant
// arguments it can take (a non-default `out` is not); *result says what
// its result is. Its tensor operands are the Value slots, in order.
bool is_fusable_pointwise(const CapturedGraph::Node& node, LaneType* result);
// The lane types the op's tensor operands must have.
std::vector<LaneType> operand_lane_types(const CapturedGraph::Node& node);

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
  };
  std::vector<int> inputs;
  std::vector<FusedKernel::InputKind> input_kinds;
  std::vector<Step> steps;
  std::vector<int> outputs;
};

// The source of extern "C" `name` (FusedKernel::Fn) for one plan.
std::string loop_source(const std::string& name, const LoopPlan& plan);
// What every generated file starts with (includes, load and store helpers).
std::string loops_prelude();

}  // namespace trainrun::compile
