#pragma once
// Saved tensors a recorded backward can make again instead of keeping: a
// value the forward computed with one cheap pointwise op (arithmetic,
// relu, where: no transcendental function) from other saved values (h =
// t * gain when t and gain are saved for the mul's own backward) is
// recomputed in the backward, just before its first reader, so the forward
// keeps one activation fewer alive until backward. A recomputed op reads
// only saved tensors, so no other value's life grows. GELU's erf costs
// more than it saves (4 ns an element here: it would cost the MLP's step 9%).
#include <memory>
#include <vector>

#include "compile/captured_graph.h"

namespace trainrun::compile {

struct RecomputePlan {
  std::shared_ptr<const CapturedGraph> backward;  // with the recomputing nodes inserted
  std::vector<int> saved;                         // the saved forward values, -1 where the backward recomputes it
  int recomputed = 0;
  int64_t bytes = 0;  // what the forward no longer keeps
};

// `saved`: the forward values the backward reads, its inputs after the `num_gradients` output gradients.
RecomputePlan plan_recompute(const CapturedGraph& forward, const std::shared_ptr<const CapturedGraph>& backward,
                             const std::vector<int>& saved, size_t num_gradients);

}  // namespace trainrun::compile
