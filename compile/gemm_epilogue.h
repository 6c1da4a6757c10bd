#pragma once
// A linear layer's activation folded into its GEMM: addmm, maybe a view of
// it, then relu (or gelu, the erf form) becomes one _addmm_activation, which
// oneDNN computes as it writes the product (tensor/cpu/matmul_onednn.h), so
// the activation makes no pass over memory of its own. Only where the
// product itself is read by nothing else (not the backward: a training
// graph's GELU keeps its input, so only relu folds there). For graphs that
// run without autograd.
#include <memory>
#include <vector>

#include "compile/captured_graph.h"

namespace trainrun::compile {

// `keep`: values read after the graph (what a backward reads). *folded: how many activations went into GEMMs.
std::shared_ptr<const CapturedGraph> fold_gemm_activations(const std::shared_ptr<const CapturedGraph>& graph,
                                                           const std::vector<int>& keep, int* folded);

}  // namespace trainrun::compile
