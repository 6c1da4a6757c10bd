#include "compile/scatter_sum.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace trainrun::compile {
namespace {

using Node = CapturedGraph::Node;
using Slot = CapturedGraph::Slot;

bool is_op(const Node& n, const char* name) { return n.op != nullptr && n.op->name() == name; }

// add(self, other, alpha) with no out= tensor (the schema's trailing `Tensor? out`, recorded undefined).
bool is_plain_add(const Node& n) {
  return is_op(n, "add") && n.results.size() == 1 && n.args.size() >= 3 &&
         (n.args.size() == 3 || (n.args.size() == 4 && n.args[3].kind == Slot::Constant));
}

std::optional<int64_t> int_constant(const Slot& s) {
  if (s.kind != Slot::Constant) return std::nullopt;
  IValue v = s.constant;
  if (v.is_none()) return std::nullopt;
  return v.get<int64_t>();
}

// One piece: an allocation filled with zeros, one view of it (a slice of
// step 1 or a select along `dim`) that a copy_ fills, read by one add.
struct Piece {
  size_t alloc = 0, fill = 0, view = 0, copy = 0;
  int buffer = -1;
  int64_t dim = 0, lo = 0, hi = 0;  // the rows [lo, hi) of dim it writes
};

}  // namespace

std::shared_ptr<const CapturedGraph> fold_scatter_sums(const std::shared_ptr<const CapturedGraph>& graph,
                                                       int* folded) {
  *folded = 0;
  const OpTable* alias_op = Dispatcher::get().find("alias");  // what a folded sum's value becomes
  if (alias_op == nullptr) return graph;
  const CapturedGraph& g = *graph;
  const std::vector<Node>& nodes = g.nodes();
  const size_t num_values = static_cast<size_t>(g.num_values());
  // Per value: the nodes reading it, and whether it leaves the graph.
  std::vector<std::vector<size_t>> readers(num_values);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Slot& s : nodes[i].args) {
      if (s.kind == Slot::Value) readers[s.value].push_back(i);
      for (int v : s.values) readers[v].push_back(i);
    }
  std::vector<char> is_output(num_values, 0);
  for (int v : g.outputs())
    if (v >= 0) is_output[v] = 1;
  std::vector<size_t> made_by_add(num_values, nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (is_plain_add(nodes[i])) made_by_add[nodes[i].results[0].value] = i;

  // The pieces, by the value of their buffer.
  std::vector<std::optional<Piece>> piece_of(num_values);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].is_alloc()) continue;
    const int z = nodes[i].results[0].value;
    const std::vector<size_t>& r = readers[z];
    if (r.size() != 3 || is_output[z]) continue;  // fill_, the view, the add
    Piece p;
    p.alloc = i;
    p.buffer = z;
    const Node& fill = nodes[r[0]];
    const Node& view = nodes[r[1]];
    if (!is_op(fill, "fill_") || fill.args[1].kind != Slot::Constant) continue;
    {
      IValue value = fill.args[1].constant;
      if (value.get<Scalar>().to_double() != 0.0) continue;
    }
    const IntList& sizes = nodes[i].alloc_sizes;
    const auto d = int_constant(view.args[1]);
    if (!d) continue;
    p.dim = *d < 0 ? *d + static_cast<int64_t>(sizes.size()) : *d;
    if (p.dim < 0 || p.dim >= static_cast<int64_t>(sizes.size())) continue;
    const int64_t extent = sizes[static_cast<size_t>(p.dim)];
    if (is_op(view, "slice")) {
      const auto step = int_constant(view.args[4]);
      if (!step || *step != 1) continue;
      int64_t lo = int_constant(view.args[2]).value_or(0), hi = int_constant(view.args[3]).value_or(extent);
      if (lo < 0) lo += extent;
      if (hi < 0) hi += extent;
      p.lo = std::clamp<int64_t>(lo, 0, extent);
      p.hi = std::clamp<int64_t>(hi, p.lo, extent);
    } else if (is_op(view, "select")) {
      const auto index = int_constant(view.args[2]);
      if (!index) continue;
      p.lo = *index < 0 ? *index + extent : *index;
      p.hi = p.lo + 1;
    } else {
      continue;
    }
    const int s = view.results[0].value;
    if (readers[s].size() != 1 || is_output[s]) continue;
    const Node& copy = nodes[readers[s][0]];
    if (!is_op(copy, "copy_") || copy.args[0].kind != Slot::Value || copy.args[0].value != s) continue;
    if (!is_plain_add(nodes[r[2]])) continue;
    p.fill = r[0];
    p.view = r[1];
    p.copy = readers[s][0];
    piece_of[z] = p;
  }

  // add(a, b) with alpha 1 whose operands are pieces or such adds read only by it: a sum of pieces.
  std::vector<char> drop(nodes.size(), 0);
  std::vector<std::optional<Node>> replace(nodes.size());
  std::vector<std::optional<int>> retarget(nodes.size());  // a piece's view: the buffer it views now
  std::vector<char> summed(nodes.size(), 0);                // an add taken into a sum already
  for (size_t root = nodes.size(); root-- > 0;) {
    const Node& add = nodes[root];
    if (!is_plain_add(add) || summed[root]) continue;
    // Gather the tree under this add: its leaves must be pieces, its inner adds read only here.
    std::vector<Piece> leaves;
    std::vector<size_t> inner;
    bool ok = true;
    std::vector<size_t> stack = {root};
    while (ok && !stack.empty()) {
      const Node& a = nodes[stack.back()];
      stack.pop_back();
      if (a.args[2].kind != Slot::Constant) {
        ok = false;
        break;
      }
      IValue alpha = a.args[2].constant;
      if (alpha.get<Scalar>().to_double() != 1.0) {
        ok = false;
        break;
      }
      for (int k = 0; k < 2 && ok; ++k) {
        if (a.args[k].kind != Slot::Value) {
          ok = false;
          break;
        }
        const int v = a.args[k].value;
        if (piece_of[v]) {
          leaves.push_back(*piece_of[v]);
          continue;
        }
        // An inner add: made by an add, read only by this one.
        const size_t producer = made_by_add[v];
        if (producer == nodes.size() || readers[v].size() != 1 || is_output[v]) ok = false;
        else {
          inner.push_back(producer);
          stack.push_back(producer);
        }
      }
    }
    if (!ok || leaves.size() < 2) continue;
    // One shape, dtype and dim; disjoint rows.
    const Piece& first = *std::min_element(leaves.begin(), leaves.end(),
                                           [](const Piece& a, const Piece& b) { return a.alloc < b.alloc; });
    const Node& m = nodes[first.alloc];
    std::vector<std::pair<int64_t, int64_t>> rows;
    for (const Piece& p : leaves) {
      const Node& pm = nodes[p.alloc];
      ok = ok && pm.alloc_sizes == m.alloc_sizes && pm.alloc_strides == m.alloc_strides &&
           pm.alloc_dtype == m.alloc_dtype && pm.alloc_device == m.alloc_device && p.dim == first.dim &&
           (p.buffer == first.buffer || p.view > first.fill);
      rows.emplace_back(p.lo, p.hi);
    }
    std::sort(rows.begin(), rows.end());
    bool covers = rows.front().first == 0;
    for (size_t k = 1; k < rows.size() && ok; ++k) {
      ok = rows[k].first >= rows[k - 1].second;
      covers = covers && rows[k].first == rows[k - 1].second;
    }
    covers = covers && rows.back().second == m.alloc_sizes[static_cast<size_t>(first.dim)];
    if (!ok) continue;

    for (const Piece& p : leaves)
      if (p.buffer != first.buffer) {
        drop[p.alloc] = drop[p.fill] = 1;
        retarget[p.view] = first.buffer;
      }
    if (covers) drop[first.fill] = 1;  // every element is written by a piece
    for (size_t j : inner) drop[j] = summed[j] = 1;
    Node alias;
    alias.op = alias_op;
    Slot in;
    in.kind = Slot::Value;
    in.value = first.buffer;
    alias.args = {in};
    alias.results = add.results;
    alias.grad_enabled = false;
    replace[root] = std::move(alias);
    *folded += 1;
  }
  if (*folded == 0) return graph;
  std::vector<Node> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (drop[i]) continue;
    if (replace[i]) {
      out.push_back(*replace[i]);
      continue;
    }
    out.push_back(nodes[i]);
    if (retarget[i]) out.back().args[0].value = *retarget[i];
  }
  return g.with_nodes(std::move(out));
}

}  // namespace trainrun::compile
