#include "compile/recompute.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "compile/pointwise_codegen.h"

namespace trainrun::compile {

namespace {

bool cheap(const CapturedGraph::Node& node) {
  static const std::unordered_set<std::string> ops = {"add", "sub", "mul", "div", "neg",     "abs",
                                                      "relu", "where", "addcmul", "lerp"};
  return node.op != nullptr && ops.count(node.op->name()) > 0;
}

}  // namespace

RecomputePlan plan_recompute(const CapturedGraph& forward, const std::shared_ptr<const CapturedGraph>& backward,
                             const std::vector<int>& saved, size_t num_gradients) {
  RecomputePlan plan{backward, saved};
  std::unordered_map<int, size_t> producer;  // forward value -> the node making it
  for (size_t i = 0; i < forward.nodes().size(); ++i)
    for (const CapturedGraph::Slot& r : forward.nodes()[i].results)
      if (r.kind == CapturedGraph::Slot::Value) producer[r.value] = i;
  std::unordered_map<int, size_t> saved_at;  // forward value -> its index in saved
  for (size_t j = 0; j < saved.size(); ++j) saved_at.emplace(saved[j], j);
  const std::vector<int>& bw_inputs = backward->inputs();
  auto backward_id = [&](size_t j) { return bw_inputs[num_gradients + j]; };

  std::vector<char> recomputed(saved.size(), 0);
  std::unordered_map<int, CapturedGraph::Node> insert_before_first_reader;  // backward value -> its node
  for (size_t j = 0; j < saved.size(); ++j) {
    auto p = producer.find(saved[j]);
    if (p == producer.end()) continue;  // an input or a captured tensor: kept by its owner anyway
    const CapturedGraph::Node& node = forward.nodes()[p->second];
    LaneType lane;
    if (!cheap(node) || !is_fusable_pointwise(node, &lane) || lane != LaneType::Float) continue;
    CapturedGraph::Node copy = node;
    bool from_saved = true;
    for (CapturedGraph::Slot& a : copy.args) {
      if (a.kind == CapturedGraph::Slot::ValueList) from_saved = false;
      if (a.kind != CapturedGraph::Slot::Value) continue;
      auto s = saved_at.find(a.value);
      if (s == saved_at.end() || recomputed[s->second] || s->second == j) {
        from_saved = false;
        break;
      }
      a.value = backward_id(s->second);
    }
    if (!from_saved) continue;
    copy.results[0].value = backward_id(j);
    copy.grad_enabled = false;
    recomputed[j] = 1;
    plan.saved[j] = -1;
    plan.recomputed += 1;
    const CapturedGraph::ValueMeta& m = forward.meta(saved[j]);
    int64_t n = 1;
    for (int64_t s : m.sizes) n *= s;
    plan.bytes += n * element_size(m.dtype);
    insert_before_first_reader.emplace(backward_id(j), std::move(copy));
  }
  if (plan.recomputed == 0) return plan;
  // An operand of a recomputing node must not be one recomputed itself (checked above), so each node only
  // needs to come before the first node reading its value.
  std::vector<CapturedGraph::Node> nodes;
  for (const CapturedGraph::Node& n : backward->nodes()) {
    for (const CapturedGraph::Slot& a : n.args) {
      std::vector<int> read = a.kind == CapturedGraph::Slot::Value ? std::vector<int>{a.value} : a.values;
      for (int v : read) {
        auto it = insert_before_first_reader.find(v);
        if (it == insert_before_first_reader.end()) continue;
        nodes.push_back(std::move(it->second));
        insert_before_first_reader.erase(it);
      }
    }
    nodes.push_back(n);
  }
  plan.backward = backward->with_nodes(std::move(nodes));
  return plan;
}

}  // namespace trainrun::compile
