#include "compile/captured_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "autograd/grad_mode.h"
#include "base/error.h"
#include "compile/external_call.h"
#include "compile/fused_kernel.h"
#include "tensor/factories.h"
#include "tensor/generator.h"
#include "tensor/record_function.h"

namespace trainrun::compile {

std::string CapturedGraph::Node::name() const {
  if (op != nullptr) return op->name();
  if (fused != nullptr) return fused->name;
  if (external != nullptr) return external->name();
  return "empty_strided";
}

int CapturedGraph::add_input() {
  inputs_.push_back(num_values_);
  return num_values_++;
}

int CapturedGraph::add_constant(const Tensor& t) {
  constants_.emplace_back(num_values_, t);
  return num_values_++;
}

void CapturedGraph::set_meta(int id, const Tensor& t) {
  if (static_cast<int>(metas_.size()) <= id) metas_.resize(static_cast<size_t>(id) + 1);
  if (!t.defined()) return;
  metas_[id] = ValueMeta{true, t.sizes(), t.strides(), t.dtype(), t.device()};
}

void CapturedGraph::set_meta(int id, ValueMeta meta) {
  if (static_cast<int>(metas_.size()) <= id) metas_.resize(static_cast<size_t>(id) + 1);
  metas_[id] = std::move(meta);
}

const CapturedGraph::ValueMeta& CapturedGraph::meta(int id) const {
  static const ValueMeta unknown;
  return id >= 0 && id < static_cast<int>(metas_.size()) ? metas_[id] : unknown;
}

void CapturedGraph::set_outputs(std::vector<int> outputs) {
  outputs_ = std::move(outputs);
  make_free_after();
}

std::shared_ptr<CapturedGraph> CapturedGraph::with_nodes(std::vector<Node> nodes,
                                                         std::vector<std::pair<int, Tensor>> more_constants) const {
  auto g = std::make_shared<CapturedGraph>();
  g->num_values_ = num_values_;
  g->inputs_ = inputs_;
  g->constants_ = constants_;
  for (auto& c : more_constants) g->constants_.push_back(std::move(c));
  g->metas_ = metas_;
  g->nodes_ = std::move(nodes);
  g->set_outputs(outputs_);
  return g;
}

std::shared_ptr<CapturedGraph> CapturedGraph::with_constants(const std::vector<Tensor>& constants) const {
  TR_CHECK(constants.size() == constants_.size(), ValueError,
           "CapturedGraph::with_constants: {} tensors for {} constants", constants.size(), constants_.size());
  std::shared_ptr<CapturedGraph> g = with_nodes(nodes_);
  for (size_t i = 0; i < constants.size(); ++i) {
    const Tensor& was = constants_[i].second;
    const Tensor& now = constants[i];
    TR_CHECK(now.sizes() == was.sizes() && now.dtype() == was.dtype(), ValueError,
             "CapturedGraph::with_constants: constant {} changes shape or dtype", i);
    g->constants_[i].second = now;
  }
  return g;
}

std::shared_ptr<CapturedGraph> CapturedGraph::assemble(int num_values, std::vector<int> inputs,
                                                       std::vector<std::pair<int, Tensor>> constants,
                                                       std::vector<Node> nodes, std::vector<int> outputs) {
  auto g = std::make_shared<CapturedGraph>();
  g->num_values_ = num_values;
  g->inputs_ = std::move(inputs);
  g->constants_ = std::move(constants);
  g->nodes_ = std::move(nodes);
  auto check = [&](int v, const char* what) {
    TR_CHECK(v >= -1 && v < num_values, ValueError, "CapturedGraph::assemble: {} names value %{} of {}", what, v,
             num_values);
  };
  for (int v : g->inputs_) check(v, "an input");
  for (const auto& c : g->constants_) check(c.first, "a constant");
  for (const Node& n : g->nodes_) {
    for (const Slot& s : n.args) {
      if (s.kind == Slot::Value) check(s.value, "an argument");
      for (int v : s.values) check(v, "an argument");
    }
    for (const Slot& s : n.results) {
      if (s.kind == Slot::Value) check(s.value, "a result");
      for (int v : s.values) check(v, "a result");
    }
  }
  for (int v : outputs) check(v, "an output");
  g->set_outputs(std::move(outputs));
  return g;
}

void CapturedGraph::make_free_after() {
  std::vector<int> last(static_cast<size_t>(num_values_), -1);  // the last node reading or making each value
  auto touch = [&](const Slot& s, int i) {
    if (s.kind == Slot::Value) last[s.value] = i;
    if (s.kind == Slot::ValueList)
      for (int v : s.values) last[v] = i;
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const Slot& s : nodes_[i].args) touch(s, static_cast<int>(i));
    for (const Slot& s : nodes_[i].results) touch(s, static_cast<int>(i));
  }
  for (int v : outputs_)
    if (v >= 0) last[v] = -1;
  free_after_.assign(nodes_.size(), {});
  for (int v = 0; v < num_values_; ++v)
    if (last[v] >= 0) free_after_[last[v]].push_back(v);
}

std::vector<Tensor> CapturedGraph::run(const std::vector<Tensor>& inputs, const RunOptions& options) const {
  TR_CHECK(inputs.size() == inputs_.size(), ValueError, "CapturedGraph::run: {} inputs given, the graph takes {}",
           inputs.size(), inputs_.size());
  TR_CHECK(free_after_.size() == nodes_.size(), ValueError, "CapturedGraph::run: the graph has no outputs set yet");
  std::vector<Tensor> values(static_cast<size_t>(num_values_));
  std::vector<char> kept(static_cast<size_t>(num_values_), 0);
  if (options.keep != nullptr)
    for (int v : *options.keep) kept[v] = 1;
  for (size_t i = 0; i < inputs.size(); ++i) values[inputs_[i]] = inputs[i];
  for (const auto& [id, t] : constants_) values[id] = t;
  // Without autograd's graph the ops skip their autograd kernels altogether.
  const DispatchKeySet drop = options.record_autograd ? DispatchKeySet() : DispatchKeySet(DispatchKey::Autograd);
  Stack stack;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    if (node.fused != nullptr) {
      std::vector<Tensor> in, out;
      in.reserve(node.args.size());
      for (const Slot& a : node.args) in.push_back(values[a.value]);
      std::optional<profiling::Range> range;  // a generated loop is one event, named as explain() shows it
      if (profiling::active())
        range.emplace(fmt::format("{}[{}]", node.fused->name, fmt::join(node.fused->ops, ", ")));
      node.fused->run(in, out);
      range.reset();
      for (size_t r = 0; r < out.size(); ++r) values[node.results[r].value] = std::move(out[r]);
      for (int v : free_after_[n])
        if (!kept[v]) values[v] = Tensor();
      continue;
    }
    if (node.external != nullptr) {
      std::vector<Tensor> in;
      for (const Slot& a : node.args) in.push_back(values[a.value]);
      AutoGradMode mode(node.grad_enabled && options.record_autograd);
      std::vector<Tensor> out = node.external->call(in);
      TR_CHECK(out.size() == node.results.size(), ValueError,
               "CapturedGraph::run: '{}' gave {} tensors, {} were recorded", node.external->name(), out.size(),
               node.results.size());
      for (size_t r = 0; r < out.size(); ++r) values[node.results[r].value] = std::move(out[r]);
      for (int v : free_after_[n])
        if (!kept[v]) values[v] = Tensor();
      continue;
    }
    if (node.op == nullptr) {
      values[node.results[0].value] = empty_strided(node.alloc_sizes, node.alloc_strides,
                                                    TensorOptions(node.alloc_dtype, node.alloc_device));
      for (int v : free_after_[n])
        if (!kept[v]) values[v] = Tensor();
      continue;
    }
    stack.clear();
    DispatchKeySet keys;
    for (const Slot& a : node.args) {
      switch (a.kind) {
        case Slot::Value: {
          const Tensor& t = values[a.value];
          if (t.defined()) keys = keys | t.key_set();
          stack.emplace_back(t);
          break;
        }
        case Slot::ValueList: {
          std::vector<Tensor> list;
          list.reserve(a.values.size());
          for (int v : a.values) {
            if (values[v].defined()) keys = keys | values[v].key_set();
            list.push_back(values[v]);
          }
          stack.emplace_back(std::move(list));
          break;
        }
        case Slot::Constant:
          stack.push_back(a.constant);
          break;
      }
    }
    if (node.random_elements >= 0) {  // a fresh draw, as the eager call makes
      Generator& gen = default_generator();
      stack[4] = IValue(static_cast<int64_t>(gen.seed()));
      stack[5] = IValue(static_cast<int64_t>(gen.reserve(static_cast<uint64_t>(node.random_elements))));
    }
    AutoGradMode mode(node.grad_enabled && options.record_autograd);
    node.op->call_boxed(keys - drop, stack);
    TR_CHECK(stack.size() == node.results.size(), ValueError,
             "CapturedGraph::run: op '{}' left {} results, {} were recorded", node.op->name(), stack.size(),
             node.results.size());
    for (size_t r = 0; r < node.results.size(); ++r) {
      const Slot& s = node.results[r];
      if (s.kind == Slot::Value) {
        values[s.value] = stack[r].get<Tensor>();
      } else if (s.kind == Slot::ValueList) {
        std::vector<Tensor>& list = stack[r].get<std::vector<Tensor>>();
        TR_CHECK(list.size() == s.values.size(), ValueError,
                 "CapturedGraph::run: op '{}' gave {} tensors, {} were recorded", node.op->name(), list.size(),
                 s.values.size());
        for (size_t k = 0; k < list.size(); ++k) values[s.values[k]] = list[k];
      }
    }
    for (int v : free_after_[n])
      if (!kept[v]) values[v] = Tensor();
  }
  std::vector<Tensor> out;
  out.reserve(outputs_.size() + (options.keep ? options.keep->size() : 0));
  for (int v : outputs_) out.push_back(v >= 0 ? values[v] : Tensor());
  if (options.keep != nullptr)
    for (int v : *options.keep) out.push_back(values[v]);
  return out;
}

std::string CapturedGraph::to_string() const {
  auto slot = [](const Slot& s) -> std::string {
    switch (s.kind) {
      case Slot::Value:
        return fmt::format("%{}", s.value);
      case Slot::ValueList: {
        std::string r = "[";
        for (size_t i = 0; i < s.values.size(); ++i) r += fmt::format("{}%{}", i ? ", " : "", s.values[i]);
        return r + "]";
      }
      case Slot::Constant:
        return s.constant.type_name();
    }
    return "?";
  };
  std::string out;
  for (const Node& n : nodes_) {
    if (n.fused != nullptr) {
      std::string results, args;
      for (size_t i = 0; i < n.results.size(); ++i) results += (i ? ", " : "") + slot(n.results[i]);
      for (size_t i = 0; i < n.args.size(); ++i) args += (i ? ", " : "") + slot(n.args[i]);
      out += fmt::format("  {} = {}[{}]({})\n", results, n.fused->name, fmt::join(n.fused->ops, ", "), args);
      continue;
    }
    if (n.external != nullptr) {
      std::string results, args;
      for (size_t i = 0; i < n.results.size(); ++i) results += (i ? ", " : "") + slot(n.results[i]);
      for (size_t i = 0; i < n.args.size(); ++i) args += (i ? ", " : "") + slot(n.args[i]);
      out += fmt::format("  {} = {}({})  (external)\n", results, n.external->name(), args);
      continue;
    }
    if (n.op == nullptr) {
      out += fmt::format("  %{} = empty_strided({}, {}, {})\n", n.results[0].value, fmt::join(n.alloc_sizes, "x"),
                         dtype_name(n.alloc_dtype), n.alloc_device.str());
      continue;
    }
    std::string results, args;
    for (size_t i = 0; i < n.results.size(); ++i) results += (i ? ", " : "") + slot(n.results[i]);
    for (size_t i = 0; i < n.args.size(); ++i) args += (i ? ", " : "") + slot(n.args[i]);
    out += fmt::format("  {}{}{}({})\n", results, results.empty() ? "" : " = ", n.op->name(), args);
  }
  return out;
}

}  // namespace trainrun::compile
