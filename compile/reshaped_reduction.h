#pragma once
// A sum or mean of a reshaped view, taken on the tensor under the view: a
// linear layer's bias gradient is the sum over rows of its output gradient
// viewed as [tokens, features] (sum(view(g, [B*S, F]), [0])), which is the
// sum of g [B, S, F] over its leading dims [0, 1]. Reading g itself, the
// reduction can join the generated loop that makes g (compile/fusion.h: a
// view ends a loop), so the gradient is summed as it is written instead of
// in a pass of its own. Only where the view only regroups dims of a
// contiguous tensor and the reduced dims are a leading (or trailing) group
// of both shapes (a keepdim=True sum, as sum_to makes, only where views alone
// read it: it then keeps no dims). For graphs that run without autograd.
#include <memory>

#include "compile/captured_graph.h"

namespace trainrun::compile {

// The graph with each such reduction reading the viewed tensor; `moved`: how many.
std::shared_ptr<const CapturedGraph> reduce_under_views(const std::shared_ptr<const CapturedGraph>& graph,
                                                        int* moved);

}  // namespace trainrun::compile
