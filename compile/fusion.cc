#include "compile/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "compile/device_loop.h"
#include "compile/fused_kernel.h"
#include "compile/kernel_library.h"
#include "compile/pointwise_codegen.h"

namespace trainrun::compile {
namespace {

using Meta = CapturedGraph::ValueMeta;

int64_t numel_of(const IntList& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

IntList without_leading_ones(const IntList& sizes) {
  size_t k = 0;
  while (k < sizes.size() && sizes[k] == 1) ++k;
  return IntList(sizes.begin() + static_cast<std::ptrdiff_t>(k), sizes.end());
}

// Whether fused loops can run on `d`: the CPU, or a device whose backend is linked in (compile/device_loop.h).
bool has_loops(Device d) { return d.is_cpu() || device_loop_backend(d.type) != nullptr; }

bool is_suffix(const IntList& part, const IntList& whole) {
  return part.size() <= whole.size() && std::equal(part.rbegin(), part.rend(), whole.rbegin());
}

// A value a run's step makes: its lanes, the pass over a row that makes it,
// and its extent (the run's shape, one per row, or one per column).
struct Made {
  enum Extent { Full, PerRow, PerColumn };
  LaneType lane = LaneType::Float;
  int phase = 0;
  Extent extent = Full;
};

// A run being gathered: its loop plan and what it knows of its values.
struct Run {
  size_t first = 0, last = 0;  // node indices
  Device device;               // where its values are
  LoopPlan plan;
  IntList sizes;
  int64_t numel = 0, cols = 0;
  bool cols_fixed = false;  // an input by row or column, or a reduction, has set cols
  std::unordered_map<int, Made> made;  // values its steps make
  std::unordered_map<int, size_t> input_index;
  bool empty() const { return plan.steps.empty(); }
};

// sum, mean or amax of one float32 tensor over its trailing dims (or all:
// along rows) or its leading dims (down columns), in float32.
struct ReductionShape {
  Reduction kind = Reduction::None;
  int operand = -1;
  IntList in_sizes;
  Device device;
  int64_t cols = 0;
  bool mean = false;  // times 1 / count: the loop divides by its cols (row) or rows (column) at run time
};

std::optional<ReductionShape> reduction_of(const CapturedGraph& g, const CapturedGraph::Node& node) {
  if (node.op == nullptr) return std::nullopt;
  const std::string& name = node.op->name();
  if (name != "sum" && name != "mean" && name != "amax") return std::nullopt;
  if (node.results.size() != 1 || node.results[0].kind != CapturedGraph::Slot::Value) return std::nullopt;
  if (node.args.size() < 3 || node.args[0].kind != CapturedGraph::Slot::Value) return std::nullopt;
  for (size_t a = 1; a < node.args.size(); ++a)
    if (node.args[a].kind != CapturedGraph::Slot::Constant) return std::nullopt;
  if (node.args.size() > 3) {  // dtype=: none, or float32
    IValue& dtype = const_cast<IValue&>(node.args[3].constant);
    if (!dtype.is_none() && !(std::string(dtype.type_name()) == "dtype" && dtype.get<DType>() == DType::Float32))
      return std::nullopt;
  }
  ReductionShape r;
  r.operand = node.args[0].value;
  const Meta& m = g.meta(r.operand);
  const Meta& rm = g.meta(node.results[0].value);
  if (!m.known || !rm.known || m.dtype != DType::Float32 || rm.dtype != DType::Float32 || !has_loops(m.device) ||
      m.device != rm.device || !m.contiguous() || !rm.contiguous())
    return std::nullopt;
  const int64_t n = static_cast<int64_t>(m.sizes.size());
  IntList dims;
  IValue& dim = const_cast<IValue&>(node.args[1].constant);
  if (!dim.is_none()) dims = dim.get<IntList>();
  if (dims.empty())
    for (int64_t d = 0; d < n; ++d) dims.push_back(d);
  for (int64_t& d : dims) {
    if (d < 0) d += n;
    if (d < 0 || d >= n) return std::nullopt;
  }
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) return std::nullopt;
  const int64_t numel = numel_of(m.sizes);
  if (n == 0 || numel == 0) return std::nullopt;
  int64_t count = 1;
  for (int64_t d : dims) count *= m.sizes[d];
  const bool trailing = dims.back() == n - 1 && dims.front() == n - static_cast<int64_t>(dims.size());
  const bool leading = dims.front() == 0 && dims.back() == static_cast<int64_t>(dims.size()) - 1;
  if (trailing) {
    r.kind = name == "amax" ? Reduction::RowMax : Reduction::RowSum;
    r.cols = count;
  } else if (leading && name != "amax") {
    r.kind = Reduction::ColumnSum;
    r.cols = numel / count;
  } else {
    return std::nullopt;
  }
  r.mean = name == "mean";
  r.in_sizes = m.sizes;
  r.device = m.device;
  return r;
}

// Adds reduction node `i` to `run` if it fits.
bool try_add_reduction(Run& run, const CapturedGraph& g, size_t i, const ReductionShape& red) {
  const CapturedGraph::Node& node = g.nodes()[i];
  if (!run.empty() && (red.in_sizes != run.sizes || red.device != run.device)) return false;
  if (run.cols_fixed && run.cols != red.cols) return false;
  int phase = 0;
  bool new_input = false;
  if (auto it = run.made.find(red.operand); it != run.made.end()) {
    if (it->second.lane != LaneType::Float || it->second.extent != Made::Full) return false;
    phase = it->second.phase;
  } else if (!run.input_index.count(red.operand)) {
    new_input = true;  // (reduction_of checked it is a contiguous float32 tensor of the run's shape)
  }
  if (run.empty()) {
    run.first = i;
    run.device = red.device;
    run.sizes = red.in_sizes;
    run.numel = numel_of(red.in_sizes);
  }
  run.last = i;
  run.cols = red.cols;
  run.cols_fixed = true;
  if (new_input) {
    run.input_index[red.operand] = run.plan.inputs.size();
    run.plan.inputs.push_back(red.operand);
    run.plan.input_kinds.push_back(FusedKernel::InputKind::Full);
    run.plan.host_scalar.push_back(0);
  }
  const int result = node.results[0].value;
  LoopPlan::Step step{&node, {red.operand}, result};
  step.reduction = red.kind;
  step.mean = red.mean;
  step.phase = phase;
  run.plan.steps.push_back(step);
  const bool by_row = red.kind != Reduction::ColumnSum;
  run.made[result] = Made{LaneType::Float, by_row ? phase + 1 : phase, by_row ? Made::PerRow : Made::PerColumn};
  return true;
}

// Where each value's tensor comes from, for copy_ into a fresh allocation (Tensor::to's cast).
struct Fresh {
  std::vector<char> allocated;   // made by an empty_strided node
  std::vector<size_t> first_use;  // the first node reading it (or writing it in place)
};

// Whether node i is copy_(v, src) into v fresh from an allocation (nothing read it before): a cast.
bool is_fresh_copy(const CapturedGraph::Node& node, size_t i, const Fresh& fresh) {
  return node.op != nullptr && node.op->name() == "copy_" && node.args.size() == 2 &&
         node.args[0].kind == CapturedGraph::Slot::Value && node.args[1].kind == CapturedGraph::Slot::Value &&
         fresh.allocated[node.args[0].value] && fresh.first_use[node.args[0].value] == i;
}

// The number of columns a row-broadcast input (out's sizes with trailing dims 1: [M, 1] over [M, N]) implies,
// or 0 when it is not one.
int64_t row_broadcast_cols(const IntList& in, const IntList& out) {
  if (in.size() > out.size()) return 0;
  IntList padded(out.size() - in.size(), 1);
  padded.insert(padded.end(), in.begin(), in.end());
  size_t k = 0;
  while (k < out.size() && padded[k] == out[k]) ++k;
  int64_t cols = 1;
  for (size_t d = k; d < out.size(); ++d) {
    if (padded[d] != 1) return 0;
    cols *= out[d];
  }
  return k == 0 || k == out.size() ? 0 : cols;
}

// Adds node `i` to `run` if it fits (and changes nothing when it does not).
bool try_add(Run& run, const CapturedGraph& g, size_t i, const Fresh& fresh) {
  const CapturedGraph::Node& node = g.nodes()[i];
  // An op whose kernel was replaced from Python (torch.library impl) runs that kernel, not generated code.
  if (node.op != nullptr && node.op->has_python_kernel()) return false;
  if (const std::optional<ReductionShape> red = reduction_of(g, node)) return try_add_reduction(run, g, i, *red);
  LaneType result_lane = LaneType::Float;
  const bool cast = is_fresh_copy(node, i, fresh);
  if (!cast && !is_fusable_pointwise(node, &result_lane)) return false;
  const int result = cast ? node.args[0].value : node.results[0].value;
  const Meta& rm = g.meta(result);
  if (!rm.known || !has_loops(rm.device) || !rm.contiguous()) return false;
  if (!run.empty() && rm.device != run.device) return false;
  if (rm.dtype != (result_lane == LaneType::Float ? DType::Float32 : DType::Bool)) return false;
  const int64_t numel = numel_of(rm.sizes);
  if (numel == 0) return false;
  if (!run.empty() && (rm.sizes != run.sizes)) return false;
  int64_t cols = run.empty() ? numel : run.cols;
  std::vector<LaneType> lanes;
  std::vector<const CapturedGraph::Slot*> operand_slots;
  if (cast) {  // the source: a mask or a float the loop made, or a float tensor
    const int src = node.args[1].value;
    auto it = run.made.find(src);
    lanes.push_back(it != run.made.end() ? it->second.lane : LaneType::Float);
    operand_slots.push_back(&node.args[1]);
  } else {
    lanes = operand_lane_types(node);
    for (const CapturedGraph::Slot& s : node.args)
      if (s.kind == CapturedGraph::Slot::Value) operand_slots.push_back(&s);
  }
  std::vector<int> operands;
  std::vector<std::pair<int, FusedKernel::InputKind>> new_inputs;
  size_t k = 0;
  int phase = 0;
  bool cols_fixed = run.cols_fixed;
  for (const CapturedGraph::Slot* slot : operand_slots) {
    const int v = slot->value;
    const LaneType want = lanes[k++];
    operands.push_back(v);
    if (auto it = run.made.find(v); it != run.made.end()) {
      const Made& made = it->second;
      if (made.lane != want || made.extent == Made::PerColumn) return false;
      // A per-row result is read broadcast over its row ([M, 1] against [M, N]), not as a column (one row:
      // a reduction of everything, read as a number).
      if (made.extent == Made::PerRow && run.numel != run.cols && row_broadcast_cols(g.meta(v).sizes, rm.sizes) != run.cols)
        return false;
      phase = std::max(phase, made.phase);
      continue;
    }
    if (run.input_index.count(v)) continue;
    bool listed = false;
    for (auto& [w, kind] : new_inputs) listed = listed || w == v;
    if (listed) continue;
    if (want != LaneType::Float) return false;  // a mask made outside the loop: not fused
    const Meta& m = g.meta(v);
    if (!m.known) return false;
    const int64_t n = numel_of(m.sizes);
    // A number may be on the CPU in a device's loop (x * 0.5 on CUDA); the loop reads it at run time.
    if (n == 1 && (m.device == rm.device || m.device.is_cpu()) &&
        (m.dtype == DType::Float32 || m.dtype == DType::Float64 || m.dtype == DType::Int64 ||
         m.dtype == DType::Int32 || m.dtype == DType::Bool)) {
      new_inputs.push_back({v, FusedKernel::InputKind::Scalar});
      continue;
    }
    if (m.device != rm.device || m.dtype != DType::Float32 || !m.contiguous()) return false;
    const IntList trimmed = without_leading_ones(m.sizes);
    if (trimmed == without_leading_ones(rm.sizes)) {
      new_inputs.push_back({v, FusedKernel::InputKind::Full});
    } else if (is_suffix(trimmed, rm.sizes) && n > 1 && (!cols_fixed || cols == n)) {
      cols = n;
      cols_fixed = true;
      new_inputs.push_back({v, FusedKernel::InputKind::Column});
    } else if (const int64_t row_cols = row_broadcast_cols(m.sizes, rm.sizes);
               row_cols > 0 && (!cols_fixed || cols == row_cols)) {
      cols = row_cols;
      cols_fixed = true;
      new_inputs.push_back({v, FusedKernel::InputKind::Row});
    } else {
      return false;
    }
  }
  if (run.empty()) {
    run.first = i;
    run.device = rm.device;
    run.sizes = rm.sizes;
    run.numel = numel;
  }
  run.last = i;
  run.cols = cols;
  run.cols_fixed = cols_fixed;
  for (auto& [v, kind] : new_inputs) {
    run.input_index[v] = run.plan.inputs.size();
    run.plan.inputs.push_back(v);
    run.plan.input_kinds.push_back(kind);
    run.plan.host_scalar.push_back(kind == FusedKernel::InputKind::Scalar && g.meta(v).device.is_cpu() &&
                                   !run.device.is_cpu());
  }
  LoopPlan::Step step{&node, operands, result};
  step.cast = cast;
  step.cast_from_mask = cast && lanes[0] == LaneType::Mask;
  step.phase = phase;
  run.plan.steps.push_back(step);
  run.made[result] = Made{result_lane, phase, Made::Full};
  return true;
}

}  // namespace

bool fusion_enabled() {
  const char* v = std::getenv("TRAINRUN_COMPILE_FUSION");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

namespace {

// The runs of a graph and its new program, in order: a node of the graph (index) or a run (-1 - its index).
struct Planned {
  std::vector<Run> runs;
  std::vector<long> program;
};

Planned plan_runs(const CapturedGraph& g, const std::vector<int>& keep) {
  const auto& nodes = g.nodes();
  // Per value, the last node reading it; values read after the graph count as read at the end.
  std::vector<size_t> last_read(static_cast<size_t>(g.num_values()), 0);
  std::vector<char> read_after(static_cast<size_t>(g.num_values()), 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const CapturedGraph::Slot& s : nodes[i].args) {
      if (s.kind == CapturedGraph::Slot::Value) last_read[s.value] = i;
      if (s.kind == CapturedGraph::Slot::ValueList)
        for (int v : s.values) last_read[v] = i;
    }
  for (int v : g.outputs())
    if (v >= 0) read_after[v] = 1;
  for (int v : keep) read_after[v] = 1;

  // A number in an op (x * 0.5, gt(x, 0)) is a one-element tensor the call made: empty_strided then fill_.
  // Those two nodes read nothing, so they move before the loop that reads the number instead of ending it.
  std::vector<char> makes_number(nodes.size(), 0);
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    const CapturedGraph::Node& a = nodes[i];
    const CapturedGraph::Node& b = nodes[i + 1];
    if (a.is_alloc() && numel_of(a.alloc_sizes) == 1 && b.op != nullptr &&
        b.op->name() == "fill_" && b.args.size() == 2 && b.args[0].kind == CapturedGraph::Slot::Value &&
        b.args[0].value == a.results[0].value && b.args[1].kind == CapturedGraph::Slot::Constant)
      makes_number[i] = makes_number[i + 1] = 1;
  }

  // Allocations a copy_ fills first (Tensor::to's cast) move before the loop too; the loop makes that value.
  Fresh fresh;
  fresh.allocated.assign(static_cast<size_t>(g.num_values()), 0);
  fresh.first_use.assign(static_cast<size_t>(g.num_values()), nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].is_alloc()) fresh.allocated[nodes[i].results[0].value] = 1;
    for (const CapturedGraph::Slot& s : nodes[i].args) {
      if (s.kind == CapturedGraph::Slot::Value) fresh.first_use[s.value] = std::min(fresh.first_use[s.value], i);
      for (int v : s.values) fresh.first_use[v] = std::min(fresh.first_use[v], i);
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].is_alloc()) {
      const int v = nodes[i].results[0].value;
      const size_t use = fresh.first_use[v];
      if (use < nodes.size() && is_fresh_copy(nodes[use], use, fresh)) makes_number[i] = 1;  // (movable alike)
    }

  Planned planned;
  std::vector<Run>& runs = planned.runs;
  std::vector<long>& program = planned.program;
  std::vector<size_t> moved;  // number-making nodes met while a run was open
  auto close = [&](Run& run) {
    bool kept = run.plan.steps.size() >= 2;
    if (kept) {
      for (auto& [v, made] : run.made)  // (a column's sum is written whatever reads it: it is not read in the loop)
        if (read_after[v] || last_read[v] > run.last || made.extent == Made::PerColumn) {
          if (made.lane == LaneType::Mask) kept = false;  // a comparison read outside: it would need writing as bools
          run.plan.outputs.push_back(v);
        }
      std::sort(run.plan.outputs.begin(), run.plan.outputs.end());
      kept = kept && !run.plan.outputs.empty();
      // A device's backend may find the eager kernels better for this loop's shape (few long rows to reduce).
      if (kept && !run.device.is_cpu())
        kept = device_loop_backend(run.device.type)->fits(run.plan, run.numel / run.cols, run.cols);
    }
    if (kept) {
      for (size_t i : moved)  // (an allocation the loop fills itself is not made)
        if (!(nodes[i].is_alloc() && run.made.count(nodes[i].results[0].value)))
          program.push_back(static_cast<long>(i));
      program.push_back(-1 - static_cast<long>(runs.size()));
      runs.push_back(std::move(run));
    } else if (!run.empty()) {  // the nodes as they were, and those moved past its last step
      for (size_t i = run.first; i <= run.last; ++i) program.push_back(static_cast<long>(i));
      for (size_t i : moved)
        if (i > run.last) program.push_back(static_cast<long>(i));
    } else {
      for (size_t i : moved) program.push_back(static_cast<long>(i));
    }
    moved.clear();
    run = Run{};
  };
  Run current;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (makes_number[i] && !current.empty()) {
      moved.push_back(i);
      continue;
    }
    if (try_add(current, g, i, fresh)) continue;
    close(current);
    if (!try_add(current, g, i, fresh)) program.push_back(static_cast<long>(i));
  }
  close(current);
  return planned;
}

}  // namespace

std::vector<LoopPlan> plan_loops(const CapturedGraph& graph, const std::vector<int>& keep) {
  std::vector<LoopPlan> plans;
  for (Run& run : plan_runs(graph, keep).runs) plans.push_back(std::move(run.plan));
  return plans;
}

FusionResult fuse_pointwise(const std::shared_ptr<const CapturedGraph>& graph, const std::vector<int>& keep) {
  FusionResult result{graph};
  const CapturedGraph& g = *graph;
  const auto& nodes = g.nodes();
  const Planned planned = plan_runs(g, keep);
  const std::vector<Run>& runs = planned.runs;
  const std::vector<long>& program = planned.program;
  if (runs.empty()) return result;

  // CPU loops: one C++ file for the graph; a device's loops: built together by its backend.
  std::vector<std::string> names;
  std::string source;
  std::vector<std::pair<Device, std::vector<size_t>>> device_runs;  // (few devices: a list)
  for (size_t r = 0; r < runs.size(); ++r) {
    names.push_back(fmt::format("fused_{}", r));
    if (runs[r].device.is_cpu()) {
      source += loop_source(names.back(), runs[r].plan);
    } else {
      auto it = std::find_if(device_runs.begin(), device_runs.end(),
                             [&](const auto& d) { return d.first == runs[r].device; });
      if (it == device_runs.end()) it = device_runs.insert(device_runs.end(), {runs[r].device, {}});
      it->second.push_back(r);
    }
  }
  std::shared_ptr<KernelLibrary> library;
  if (!source.empty()) {
    source = loops_prelude() + source;
    library = KernelLibrary::load(source);
    result.source = source;
  }
  std::vector<std::shared_ptr<const DeviceLoop>> device_loops(runs.size());
  for (const auto& [device, which] : device_runs) {
    std::vector<std::string> device_names;
    std::vector<LoopPlan> plans;
    for (size_t r : which) {
      device_names.push_back(names[r]);
      plans.push_back(runs[r].plan);
    }
    const std::vector<std::shared_ptr<const DeviceLoop>> built =
        device_loop_backend(device.type)->build(device_names, plans, device);
    for (size_t k = 0; k < which.size(); ++k) device_loops[which[k]] = built.at(k);
  }

  std::vector<CapturedGraph::Node> fused_nodes;
  for (long item : program) {
    if (item >= 0) {
      fused_nodes.push_back(nodes[static_cast<size_t>(item)]);
      continue;
    }
    const size_t r = static_cast<size_t>(-1 - item);
    const Run& run = runs[r];
    auto kernel = std::make_shared<FusedKernel>();
    kernel->name = names[r];
    for (const LoopPlan::Step& s : run.plan.steps) kernel->ops.push_back(s.cast ? "to" : s.node->op->name());
    kernel->inputs = run.plan.input_kinds;
    kernel->cols = run.cols;
    kernel->rows = run.numel / run.cols;
    kernel->device = run.device;
    if (run.device.is_cpu()) {
      kernel->fn = reinterpret_cast<FusedKernel::Fn>(library->symbol(kernel->name));
      kernel->library = library;
    } else {
      kernel->device_loop = device_loops[r];
    }
    CapturedGraph::Node node;
    auto value_slot = [](int v) {
      CapturedGraph::Slot s;
      s.kind = CapturedGraph::Slot::Value;
      s.value = v;
      return s;
    };
    for (int v : run.plan.inputs) node.args.push_back(value_slot(v));
    for (int v : run.plan.outputs) {
      kernel->output_sizes.push_back(g.meta(v).sizes);
      node.results.push_back(value_slot(v));
    }
    node.grad_enabled = false;
    node.fused = std::move(kernel);
    fused_nodes.push_back(std::move(node));
    result.loops += 1;
    result.ops_fused += static_cast<int>(run.plan.steps.size());
  }
  result.graph = g.with_nodes(std::move(fused_nodes));
  return result;
}

}  // namespace trainrun::compile
