#pragma once
// Pointwise fusion: runs of consecutive pointwise ops of one shape in a
// graph that runs without autograd (a joint graph's halves, a no_grad
// recording) become one generated loop each (pointwise_codegen.h), compiled
// once per graph by the system compiler (kernel_library.h). A loop reads
// its inputs once, keeps intermediates in registers and writes only the
// values that later nodes, the outputs or the backward read.
//
// An op joins a run when its operands are contiguous float32 tensors on
// one device (the CPU, or one whose backend is linked in: compile/device_loop.h)
// of its result's shape, or broadcast along leading dims (a bias: by
// column), or one element; comparisons feeding `where` stay masks inside
// the loop. sum, mean and amax over trailing dims (along rows) or sum and
// mean over leading dims (down columns) of a value of the run's shape join
// it too: a later op of the run reads a row's result broadcast over that
// row (softmax's and layer norm's backward become one loop each). Matmuls,
// other reductions and views end a run.
#include <memory>
#include <string>
#include <vector>

#include "compile/captured_graph.h"
#include "compile/pointwise_codegen.h"

namespace trainrun::compile {

struct FusionResult {
  std::shared_ptr<const CapturedGraph> graph;  // the fused graph, or the one given when nothing fused
  int loops = 0;                               // generated loops
  int ops_fused = 0;                           // ops they replace
  std::string source;                          // the generated C++ of the loops (empty when none)
};

// `keep`: values read after the graph runs (what a backward reads), written out as outputs are.
// Throws ValueError when the compiler fails.
FusionResult fuse_pointwise(const std::shared_ptr<const CapturedGraph>& graph, const std::vector<int>& keep);

// The loops fuse_pointwise would make of `graph`, in order, without building them (their steps point into the
// graph's nodes): what another device's generator is tested on.
std::vector<LoopPlan> plan_loops(const CapturedGraph& graph, const std::vector<int>& keep);

// False when TRAINRUN_COMPILE_FUSION=0 (replays then run the recorded ops one by one).
bool fusion_enabled();

}  // namespace trainrun::compile
