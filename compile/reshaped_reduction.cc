#include "compile/reshaped_reduction.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

namespace trainrun::compile {
namespace {

using Node = CapturedGraph::Node;
using Slot = CapturedGraph::Slot;
using Meta = CapturedGraph::ValueMeta;

int64_t product(const IntList& sizes, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= sizes[d];
  return n;
}

// How many leading dims of `base` hold the first `k` dims of `viewed` (their
// sizes' products match, and the rest of both shapes is the same), or nullopt.
std::optional<size_t> leading_group(const IntList& base, const IntList& viewed, size_t k) {
  const int64_t want = product(viewed, 0, k);
  for (size_t j = 1; j <= base.size(); ++j)
    if (product(base, 0, j) == want &&
        IntList(base.begin() + static_cast<std::ptrdiff_t>(j), base.end()) ==
            IntList(viewed.begin() + static_cast<std::ptrdiff_t>(k), viewed.end()))
      return j;
  return std::nullopt;
}

// The same for the last `k` dims.
std::optional<size_t> trailing_group(const IntList& base, const IntList& viewed, size_t k) {
  const int64_t want = product(viewed, viewed.size() - k, viewed.size());
  for (size_t j = 1; j <= base.size(); ++j)
    if (product(base, base.size() - j, base.size()) == want &&
        IntList(base.begin(), base.end() - static_cast<std::ptrdiff_t>(j)) ==
            IntList(viewed.begin(), viewed.end() - static_cast<std::ptrdiff_t>(k)))
      return j;
  return std::nullopt;
}

// sum/mean(x, dims, keepdim, dtype) with constant arguments: its dims, sorted and non-negative.
std::optional<IntList> reduced_dims(const Node& n, size_t rank) {
  if (n.op == nullptr || (n.op->name() != "sum" && n.op->name() != "mean")) return std::nullopt;
  if (n.args.size() < 3 || n.args[0].kind != Slot::Value || n.results.size() != 1) return std::nullopt;
  for (size_t a = 1; a < n.args.size(); ++a)
    if (n.args[a].kind != Slot::Constant) return std::nullopt;
  IValue dim = n.args[1].constant, keepdim = n.args[2].constant;
  if (dim.is_none() || std::string(keepdim.type_name()) != "bool") return std::nullopt;
  IntList dims = dim.get<IntList>();
  if (dims.empty()) return std::nullopt;
  for (int64_t& d : dims) {
    if (d < 0) d += static_cast<int64_t>(rank);
    if (d < 0 || d >= static_cast<int64_t>(rank)) return std::nullopt;
  }
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) return std::nullopt;
  return dims;
}

}  // namespace

std::shared_ptr<const CapturedGraph> reduce_under_views(const std::shared_ptr<const CapturedGraph>& graph,
                                                        int* moved) {
  *moved = 0;
  const CapturedGraph& g = *graph;
  const std::vector<Node>& nodes = g.nodes();
  // The node making each value (the first: an in-place op's result is a value made before it), and whether a
  // node writes in place (a result that is also one of its arguments).
  std::vector<int> made_by(static_cast<size_t>(g.num_values()), -1);
  std::vector<char> in_place(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Slot& r : nodes[i].results) {
      if (r.kind != Slot::Value) continue;
      if (made_by[r.value] < 0) made_by[r.value] = static_cast<int>(i);
      for (const Slot& a : nodes[i].args) in_place[i] = in_place[i] || (a.kind == Slot::Value && a.value == r.value);
    }
  // Whether nothing between node `from` and node `to` writes in place to memory made before `from` (a write to a
  // buffer allocated in between cannot touch the base), so a reduction at `to` may run right after `from`.
  auto nothing_written_between = [&](int from, size_t to) {
    for (size_t k = static_cast<size_t>(from) + 1; k < to; ++k) {
      if (!in_place[k]) continue;
      for (const Slot& r : nodes[k].results)
        if (r.kind == Slot::Value && (made_by[r.value] <= from || !nodes[made_by[r.value]].is_alloc())) return false;
    }
    return true;
  };
  // Values read by anything but a view (a keepdim=True sum's shape changes here: only views may read it).
  std::vector<char> read_whole(static_cast<size_t>(g.num_values()), 0);
  for (const Node& n : nodes) {
    const bool view = n.op != nullptr && n.op->name() == "view";
    for (size_t a = 0; a < n.args.size(); ++a) {
      if (n.args[a].kind == Slot::Value && !(view && a == 0)) read_whole[n.args[a].value] = 1;
      for (int v : n.args[a].values) read_whole[v] = 1;
    }
  }
  for (int v : g.outputs())
    if (v >= 0) read_whole[v] = 1;
  std::vector<std::pair<int, Meta>> new_metas;  // results whose shape changes (keepdim dropped)
  std::vector<Node> out = nodes;
  std::vector<int> after(nodes.size(), -1);  // a moved reduction: the node it now follows (its base's maker)
  for (size_t i = 0; i < out.size(); ++i) {
    Node& n = out[i];
    if (n.op == nullptr || (n.op->name() != "sum" && n.op->name() != "mean") || n.args.empty() ||
        n.args[0].kind != Slot::Value)
      continue;
    const int viewed = n.args[0].value;
    if (made_by[viewed] < 0) continue;
    const Node& view = nodes[made_by[viewed]];
    if (view.op == nullptr || view.op->name() != "view" || view.args.empty() || view.args[0].kind != Slot::Value)
      continue;
    const int base = view.args[0].value;
    const Meta &vm = g.meta(viewed), &bm = g.meta(base);
    if (!vm.known || !bm.known || !vm.contiguous() || !bm.contiguous() || vm.dtype != bm.dtype) continue;
    const std::optional<IntList> dims = reduced_dims(n, vm.sizes.size());
    if (!dims) continue;
    const size_t k = dims->size(), rank = vm.sizes.size();
    const bool leading = dims->front() == 0 && dims->back() == static_cast<int64_t>(k) - 1;
    const bool trailing = dims->back() == static_cast<int64_t>(rank) - 1 &&
                          dims->front() == static_cast<int64_t>(rank - k);
    std::optional<size_t> j;
    IntList base_dims;
    if (leading && (j = leading_group(bm.sizes, vm.sizes, k))) {
      for (size_t d = 0; d < *j; ++d) base_dims.push_back(static_cast<int64_t>(d));
    } else if (trailing && (j = trailing_group(bm.sizes, vm.sizes, k))) {
      for (size_t d = bm.sizes.size() - *j; d < bm.sizes.size(); ++d) base_dims.push_back(static_cast<int64_t>(d));
    } else {
      continue;
    }
    const int result = n.results[0].value;
    const bool keepdim = n.args[2].constant.get<bool>();
    if (keepdim && read_whole[result]) continue;
    n.args[0].value = base;
    n.args[1].constant = IValue(base_dims);
    if (keepdim) {  // the result without its kept dims: the views reading it give it their shape
      n.args[2].constant = IValue(false);
      Meta m = g.meta(result);
      IntList sizes;
      for (size_t d = 0; d < bm.sizes.size(); ++d)
        if (!std::binary_search(base_dims.begin(), base_dims.end(), static_cast<int64_t>(d)))
          sizes.push_back(bm.sizes[d]);
      m.sizes = sizes;
      m.strides.assign(sizes.size(), 1);
      for (size_t d = sizes.size(); d-- > 1;) m.strides[d - 1] = m.strides[d] * sizes[d];
      new_metas.emplace_back(result, std::move(m));
    }
    // (a base the graph takes as input, or one written in place since it was made, is read where the sum was)
    if (made_by[base] >= 0 && nothing_written_between(made_by[base], i)) after[i] = made_by[base];
    *moved += 1;
  }
  if (*moved == 0) return graph;
  // Each moved reduction right after the node making its base, so that it can join that node's loop.
  std::vector<Node> ordered;
  ordered.reserve(out.size());
  std::vector<std::vector<size_t>> followers(out.size());
  for (size_t i = 0; i < out.size(); ++i)
    if (after[i] >= 0) followers[after[i]].push_back(i);
  std::function<void(size_t)> emit = [&](size_t i) {  // a node, then what now follows it (a sum of a sum, too)
    ordered.push_back(std::move(out[i]));
    for (size_t f : followers[i]) emit(f);
  };
  for (size_t i = 0; i < out.size(); ++i)
    if (after[i] < 0) emit(i);
  std::shared_ptr<CapturedGraph> moved_graph = g.with_nodes(std::move(ordered));
  for (auto& [v, m] : new_metas) moved_graph->set_meta(v, std::move(m));
  return moved_graph;
}

}  // namespace trainrun::compile
