#pragma once
// A number in an op with tensors (`x * 0.5`, attention's scale) is
// recorded as the eager call made it: a 0-d tensor allocated and filled at
// every call, two nodes of the interpreter's time (about a microsecond
// each) for a value that never changes. This pass makes each such tensor
// once, when the graph is built, and binds it as a constant of the graph,
// as a generated kernel would inline the number. Only a tensor nothing
// writes again and the graph does not give out (an output would be one
// tensor shared by every call).
#include <memory>
#include <vector>

#include "compile/captured_graph.h"

namespace trainrun::compile {

// `keep`: values read after the graph. *hoisted: how many numbers became constants.
std::shared_ptr<const CapturedGraph> hoist_scalar_constants(const std::shared_ptr<const CapturedGraph>& graph,
                                                            const std::vector<int>& keep, int* hoisted);

}  // namespace trainrun::compile
