#pragma once
// Gradients of pieces of one tensor, summed: the backward of chunk, split,
// unbind or slicing (a packed QKV weight read as three slices, an LSTM's
// four gates) gives each piece's gradient as zeros of the whole shape with
// the piece copied in, and autograd adds those up:
//
//   z1 = zeros(S); z1[a:b] = g1;  z2 = zeros(S); z2[b:c] = g2;  w = z1 + z2
//
// When the pieces are disjoint, this pass writes every piece into the first
// buffer instead (no other buffer, no fill when the pieces cover it, no
// add): w = z1 with z1[a:b] = g1 and z1[b:c] = g2. For graphs that run
// without autograd (a joint graph's halves).
#include <memory>

#include "compile/captured_graph.h"

namespace trainrun::compile {

// The graph with each such sum folded; `folded`: how many sums.
std::shared_ptr<const CapturedGraph> fold_scatter_sums(const std::shared_ptr<const CapturedGraph>& graph,
                                                       int* folded);

}  // namespace trainrun::compile
