#pragma once
// A program that runs without autograd (an exported graph, its pointwise
// runs fused) written as JSON, and read back: each node's op by its name in
// the op list, its constant arguments by type, a fused loop by the name of
// its function in the package's shared object (aot_package.h). Constants
// (the frozen weights) are written by name, not by value: the weights file
// holds them.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/captured_graph.h"
#include "compile/dynamic_shapes.h"
#include "compile/fused_kernel.h"

namespace trainrun::compile {

// input_names and constant_names: one per graph input and constant, in order. `dynamic`: the program's
// dynamic dims and size polynomials when it was exported with dynamic shapes (its base() is `graph`).
nlohmann::json program_to_json(const CapturedGraph& graph, const std::vector<std::string>& input_names,
                               const std::vector<std::string>& constant_names,
                               const DynamicProgram* dynamic = nullptr);

struct ProgramInput {
  std::string name;
  IntList sizes;
  DType dtype{};
};

struct LoadedProgram {
  std::shared_ptr<CapturedGraph> graph;
  std::vector<ProgramInput> inputs;  // (sizes: as exported; dynamic->input_dims() says which vary)
  std::shared_ptr<DynamicProgram> dynamic;  // null: the program is for the inputs' exported sizes only
};

// Throws ValueError naming what is wrong: an op this build does not have, a
// weight the file lacks, a fused loop `loop` cannot find, a malformed node.
LoadedProgram program_from_json(const nlohmann::json& program, const std::map<std::string, Tensor>& weights,
                                const std::function<FusedKernel::Fn(const std::string&)>& loop,
                                const std::shared_ptr<void>& library);

}  // namespace trainrun::compile
