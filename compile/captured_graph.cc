#include "compile/captured_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/grad_mode.h"
#include "base/error.h"
#include "tensor/factories.h"
#include "tensor/generator.h"

namespace trainrun::compile {

int CapturedGraph::add_input() {
  inputs_.push_back(num_values_);
  return num_values_++;
}

int CapturedGraph::add_constant(const Tensor& t) {
  constants_.emplace_back(num_values_, t);
  return num_values_++;
}

std::vector<Tensor> CapturedGraph::run(const std::vector<Tensor>& inputs) const {
  TR_CHECK(inputs.size() == inputs_.size(), ValueError, "CapturedGraph::run: {} inputs given, the graph takes {}",
           inputs.size(), inputs_.size());
  std::vector<Tensor> values(static_cast<size_t>(num_values_));
  for (size_t i = 0; i < inputs.size(); ++i) values[inputs_[i]] = inputs[i];
  for (const auto& [id, t] : constants_) values[id] = t;
  Stack stack;
  for (const Node& node : nodes_) {
    if (node.op == nullptr) {
      values[node.results[0].value] = empty_strided(node.alloc_sizes, node.alloc_strides,
                                                    TensorOptions(node.alloc_dtype, node.alloc_device));
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
    AutoGradMode mode(node.grad_enabled);
    node.op->call_boxed(keys, stack);
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
  }
  std::vector<Tensor> out;
  out.reserve(outputs_.size());
  for (int v : outputs_) out.push_back(values[v]);
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
