#pragma once
// An ahead-of-time package: a folder holding model.so (the program's fused
// loops, compiled, and the program itself as JSON behind
// trainrun_aot_program()) and weights.safetensors (the frozen constants by
// name). aot_model.h runs it from C++ without Python.
#include <string>
#include <vector>

#include "compile/captured_graph.h"
#include "compile/dynamic_shapes.h"

namespace trainrun::compile {

// `graph`: a no_grad program (fused or not); `kernels_source`: its loops'
// C++ (FusionResult::source; empty when none); names: one per input and per
// constant; `dynamic`: set when the program was exported with dynamic
// shapes (its base() is `graph`). Throws ValueError when the folder cannot
// be written or the compiler fails.
void write_aot_package(const std::string& dir, const CapturedGraph& graph, const std::string& kernels_source,
                       const std::vector<std::string>& input_names, const std::vector<std::string>& constant_names,
                       const DynamicProgram* dynamic = nullptr);

}  // namespace trainrun::compile
