#include "compile/dead_code.h"

namespace trainrun::compile {

std::shared_ptr<const CapturedGraph> eliminate_dead_nodes(const std::shared_ptr<const CapturedGraph>& graph,
                                                          const std::vector<int>& keep, int* removed) {
  const CapturedGraph& g = *graph;
  const auto& nodes = g.nodes();
  std::vector<char> fresh(static_cast<size_t>(g.num_values()), 0);  // made by an allocation of this graph
  for (const CapturedGraph::Node& n : nodes)
    if (n.is_alloc()) fresh[n.results[0].value] = 1;
  std::vector<char> live(static_cast<size_t>(g.num_values()), 0);
  for (int v : g.outputs())
    if (v >= 0) live[v] = 1;
  for (int v : keep) live[v] = 1;
  std::vector<char> keep_node(nodes.size(), 0);
  for (size_t i = nodes.size(); i-- > 0;) {
    const CapturedGraph::Node& n = nodes[i];
    bool needed = n.external != nullptr || n.random_elements >= 0;
    for (const CapturedGraph::Slot& r : n.results) {
      if (r.kind == CapturedGraph::Slot::Value) needed = needed || live[r.value];
      for (int v : r.values) needed = needed || live[v];
    }
    // An in-place write (a result that is one of its arguments) to a tensor this graph did not allocate.
    for (const CapturedGraph::Slot& r : n.results)
      if (r.kind == CapturedGraph::Slot::Value && !fresh[r.value])
        for (const CapturedGraph::Slot& a : n.args)
          needed = needed || (a.kind == CapturedGraph::Slot::Value && a.value == r.value);
    if (!needed) continue;
    keep_node[i] = 1;
    for (const CapturedGraph::Slot& a : n.args) {
      if (a.kind == CapturedGraph::Slot::Value) live[a.value] = 1;
      for (int v : a.values) live[v] = 1;
    }
  }
  std::vector<CapturedGraph::Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (keep_node[i]) kept.push_back(nodes[i]);
  *removed = static_cast<int>(nodes.size() - kept.size());
  if (*removed == 0) return graph;
  return g.with_nodes(std::move(kept));
}

}  // namespace trainrun::compile
