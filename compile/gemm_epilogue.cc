#include "compile/gemm_epilogue.h"

#include <optional>
#include <string>

namespace trainrun::compile {
namespace {

using Node = CapturedGraph::Node;
using Slot = CapturedGraph::Slot;

bool is_op(const Node& n, const char* name) { return n.op != nullptr && n.op->name() == name; }

bool undefined(const Slot& s) { return s.kind == Slot::Constant; }  // (an absent out= tensor)

// 0: relu, 1: gelu (erf form), nullopt: neither (or an out= form).
std::optional<bool> activation_of(const Node& n) {
  if (is_op(n, "relu") && n.args.size() == 2 && undefined(n.args[1])) return false;
  if (is_op(n, "gelu") && n.args.size() == 3 && undefined(n.args[2]) && n.args[1].kind == Slot::Constant) {
    IValue approximate = n.args[1].constant;
    if (approximate.get<std::string>() == "none") return true;
  }
  return std::nullopt;
}

Slot value_slot(int v) {
  Slot s;
  s.kind = Slot::Value;
  s.value = v;
  return s;
}

}  // namespace

std::shared_ptr<const CapturedGraph> fold_gemm_activations(const std::shared_ptr<const CapturedGraph>& graph,
                                                           const std::vector<int>& keep, int* folded) {
  *folded = 0;
  const CapturedGraph& g = *graph;
  const std::vector<Node>& nodes = g.nodes();
  const OpTable* fused_op = Dispatcher::get().find("_addmm_activation");
  const OpTable* alias_op = Dispatcher::get().find("alias");
  if (fused_op == nullptr || alias_op == nullptr) return graph;
  // Per value: its readers, and whether it is read after the graph.
  std::vector<std::vector<size_t>> readers(static_cast<size_t>(g.num_values()));
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Slot& s : nodes[i].args) {
      if (s.kind == Slot::Value) readers[s.value].push_back(i);
      for (int v : s.values) readers[v].push_back(i);
    }
  std::vector<char> read_after(static_cast<size_t>(g.num_values()), 0);
  for (int v : g.outputs())
    if (v >= 0) read_after[v] = 1;
  for (int v : keep) read_after[v] = 1;
  // Read by exactly one node, and not after the graph.
  auto only_reader = [&](int v) -> std::optional<size_t> {
    if (read_after[v] || readers[v].size() != 1) return std::nullopt;
    return readers[v][0];
  };

  std::vector<Node> out = nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& mm = nodes[i];
    if (!is_op(mm, "addmm") || mm.args.size() != 5 || mm.results.size() != 1) continue;
    if (mm.op->has_python_kernel()) continue;  // (a kernel replaced from Python runs as it is)
    const int product = mm.results[0].value;
    std::optional<size_t> next = only_reader(product);
    if (!next) continue;
    if (is_op(nodes[*next], "view")) {  // (a linear layer on 3-D input: the rows' product viewed back)
      next = only_reader(nodes[*next].results[0].value);
      if (!next) continue;
    }
    const Node& act = nodes[*next];
    const std::optional<bool> use_gelu = activation_of(act);
    if (!use_gelu || act.args[0].kind != Slot::Value || act.op->has_python_kernel()) continue;
    Node fused = mm;
    fused.op = fused_op;
    Slot flag;
    flag.constant = IValue(*use_gelu);
    fused.args.push_back(flag);
    out[i] = std::move(fused);
    Node alias;  // the activation's value is now the (viewed) product itself
    alias.op = alias_op;
    alias.args = {value_slot(act.args[0].value)};
    alias.results = act.results;
    alias.grad_enabled = false;
    out[*next] = std::move(alias);
    *folded += 1;
  }
  if (*folded == 0) return graph;
  return g.with_nodes(std::move(out));
}

}  // namespace trainrun::compile
