#include "compile/scalar_constants.h"

#include <string>
#include <unordered_set>
#include <utility>

#include "tensor/factories.h"
#include "tensor/views.h"

namespace trainrun::compile {
namespace {

using Node = CapturedGraph::Node;
using Slot = CapturedGraph::Slot;

// Ops that read a number's tensor as a value and give no view of it (a view could be written through).
bool reads_as_value(const Node& n) {
  static const std::unordered_set<std::string> ops = {
      "add", "sub", "mul", "div", "rsub", "pow", "remainder", "fmod", "atan2", "maximum", "minimum", "where",
      "masked_fill", "clamp", "lt", "le", "gt", "ge", "eq", "ne", "add_", "sub_", "mul_", "div_", "copy_"};
  return n.fused != nullptr || (n.op != nullptr && ops.count(n.op->name()) > 0);
}

bool is_fill_of(const Node& n, int value) {
  return n.op != nullptr && n.op->name() == "fill_" && n.args.size() == 2 && n.args[0].kind == Slot::Value &&
         n.args[0].value == value && n.args[1].kind == Slot::Constant && n.results.size() == 1 &&
         n.results[0].kind == Slot::Value && n.results[0].value == value;
}

}  // namespace

std::shared_ptr<const CapturedGraph> hoist_scalar_constants(const std::shared_ptr<const CapturedGraph>& graph,
                                                            const std::vector<int>& keep, int* hoisted) {
  *hoisted = 0;
  const CapturedGraph& g = *graph;
  const std::vector<Node>& nodes = g.nodes();
  // Per value: how many nodes give it as a result (an in-place op gives its argument back), and whether a node
  // other than its fill reads it in a way that could alias it.
  std::vector<int> written(static_cast<size_t>(g.num_values()), 0);
  std::vector<char> aliased(static_cast<size_t>(g.num_values()), 0);
  for (const Node& n : nodes) {
    for (const Slot& r : n.results) {
      if (r.kind == Slot::Value) written[r.value] += 1;
      for (int v : r.values) written[v] += 1;
    }
    if (reads_as_value(n) || (n.op != nullptr && n.op->name() == "fill_")) continue;
    for (const Slot& a : n.args) {
      if (a.kind == Slot::Value) aliased[a.value] = 1;
      for (int v : a.values) aliased[v] = 1;
    }
  }
  std::vector<char> leaves(static_cast<size_t>(g.num_values()), 0);
  for (int v : g.outputs())
    if (v >= 0) leaves[v] = 1;
  for (int v : keep) leaves[v] = 1;

  std::vector<Node> kept;
  std::vector<std::pair<int, Tensor>> constants;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.is_alloc() && n.alloc_sizes.empty() && i + 1 < nodes.size()) {
      const int v = n.results[0].value;
      if (is_fill_of(nodes[i + 1], v) && written[v] == 2 && !aliased[v] && !leaves[v]) {
        IValue value = nodes[i + 1].args[1].constant;
        Tensor t = empty_strided({}, {}, TensorOptions(n.alloc_dtype, n.alloc_device));
        fill_(t, value.get<Scalar>());
        constants.emplace_back(v, std::move(t));
        ++i;  // (the fill too)
        continue;
      }
    }
    kept.push_back(n);
  }
  *hoisted = static_cast<int>(constants.size());
  if (constants.empty()) return graph;
  return g.with_nodes(std::move(kept), std::move(constants));
}

}  // namespace trainrun::compile
