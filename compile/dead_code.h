#pragma once
// Drops the nodes of a graph whose results nothing reads: a recorded
// backward computes every input gradient of a formula, and the engine then
// discards those nobody asked for (a number's gradient, a frozen weight's);
// recorded, they are dead code. A node stays when it writes in place to a
// tensor it did not allocate itself (a buffer, an input, a view of one),
// draws random numbers (the generator's stream moves on), or calls code
// outside the dispatcher.
#include <memory>
#include <vector>

#include "compile/captured_graph.h"

namespace trainrun::compile {

// `keep`: values read after the graph (what a backward reads). Returns the
// graph itself when nothing is dead; *removed says how many nodes went.
std::shared_ptr<const CapturedGraph> eliminate_dead_nodes(const std::shared_ptr<const CapturedGraph>& graph,
                                                          const std::vector<int>& keep, int* removed);

}  // namespace trainrun::compile
