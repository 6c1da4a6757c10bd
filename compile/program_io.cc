#include "compile/program_io.h"

#include <fmt/format.h>

#include "base/error.h"
#include "tensor/dispatcher.h"

namespace trainrun::compile {
namespace {

using json = nlohmann::json;
using Slot = CapturedGraph::Slot;

json constant_to_json(const IValue& value) {
  IValue& v = const_cast<IValue&>(value);
  const std::string type = v.type_name();
  if (type == "None") return {{"type", "None"}};
  if (type == "Tensor") {
    TR_CHECK(!v.get<Tensor>().defined(), ValueError, "program_to_json: a tensor constant in a node's arguments");
    return {{"type", "undefined_tensor"}};
  }
  if (type == "int") return {{"type", type}, {"value", v.get<int64_t>()}};
  if (type == "float") return {{"type", type}, {"value", v.get<double>()}};
  if (type == "bool") return {{"type", type}, {"value", v.get<bool>()}};
  if (type == "int[]") {
    const IntList& list = v.get<IntList>();
    return {{"type", type}, {"value", std::vector<int64_t>(list.begin(), list.end())}};
  }
  if (type == "str") return {{"type", type}, {"value", v.get<std::string>()}};
  if (type == "dtype") return {{"type", type}, {"value", dtype_name(v.get<DType>())}};
  if (type == "Device") return {{"type", type}, {"value", v.get<Device>().str()}};
  if (type == "Scalar") {
    const Scalar& s = v.get<Scalar>();
    if (s.is_floating()) return {{"type", type}, {"kind", "float"}, {"value", s.to_double()}};
    if (s.is_bool()) return {{"type", type}, {"kind", "bool"}, {"value", s.to_bool()}};
    return {{"type", type}, {"kind", "int"}, {"value", s.to_int()}};
  }
  TR_CHECK(false, ValueError, "program_to_json: a constant of type {} cannot be written", type);
  return {};
}

IValue constant_from_json(const json& j) {
  const std::string type = j.at("type").get<std::string>();
  if (type == "None") return IValue();
  if (type == "undefined_tensor") return IValue(Tensor());
  if (type == "int") return IValue(j.at("value").get<int64_t>());
  if (type == "float") return IValue(j.at("value").get<double>());
  if (type == "bool") return IValue(j.at("value").get<bool>());
  if (type == "int[]") {
    const auto v = j.at("value").get<std::vector<int64_t>>();
    return IValue(IntList(v.begin(), v.end()));
  }
  if (type == "str") return IValue(j.at("value").get<std::string>());
  if (type == "dtype") return IValue(dtype_from_name(j.at("value").get<std::string>()));
  if (type == "Device") return IValue(Device(j.at("value").get<std::string>()));
  if (type == "Scalar") {
    const std::string kind = j.at("kind").get<std::string>();
    if (kind == "float") return IValue(Scalar(j.at("value").get<double>()));
    if (kind == "bool") return IValue(Scalar(j.at("value").get<bool>()));
    return IValue(Scalar(j.at("value").get<int64_t>()));
  }
  TR_CHECK(false, ValueError, "program: a constant of unknown type '{}'", type);
  return {};
}

json slot_to_json(const Slot& s) {
  switch (s.kind) {
    case Slot::Value: return {{"v", s.value}};
    case Slot::ValueList: return {{"list", s.values}};
    case Slot::Constant: return {{"c", constant_to_json(s.constant)}};
  }
  return {};
}

Slot slot_from_json(const json& j) {
  Slot s;
  if (j.contains("v")) {
    s.kind = Slot::Value;
    s.value = j.at("v").get<int>();
  } else if (j.contains("list")) {
    s.kind = Slot::ValueList;
    s.values = j.at("list").get<std::vector<int>>();
  } else {
    s.constant = constant_from_json(j.at("c"));
  }
  return s;
}

json sizes_json(const IntList& sizes) { return std::vector<int64_t>(sizes.begin(), sizes.end()); }
IntList sizes_of(const json& j) {
  const auto v = j.get<std::vector<int64_t>>();
  return IntList(v.begin(), v.end());
}

const char* kind_name(FusedKernel::InputKind k) {
  switch (k) {
    case FusedKernel::InputKind::Full: return "full";
    case FusedKernel::InputKind::Column: return "column";
    case FusedKernel::InputKind::Row: return "row";
    case FusedKernel::InputKind::Scalar: return "scalar";
  }
  return "?";
}

FusedKernel::InputKind kind_of(const std::string& name) {
  if (name == "full") return FusedKernel::InputKind::Full;
  if (name == "column") return FusedKernel::InputKind::Column;
  if (name == "row") return FusedKernel::InputKind::Row;
  TR_CHECK(name == "scalar", ValueError, "program: a fused loop input of unknown kind '{}'", name);
  return FusedKernel::InputKind::Scalar;
}

}  // namespace

json program_to_json(const CapturedGraph& g, const std::vector<std::string>& input_names,
                     const std::vector<std::string>& constant_names, const DynamicProgram* dynamic) {
  TR_CHECK(input_names.size() == g.inputs().size() && constant_names.size() == g.constants().size(), ValueError,
           "program_to_json: {} input names for {} inputs, {} constant names for {} constants", input_names.size(),
           g.inputs().size(), constant_names.size(), g.constants().size());
  json j;
  j["format"] = "trainrun.program/1";
  j["num_values"] = g.num_values();
  j["inputs"] = json::array();
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const CapturedGraph::ValueMeta& m = g.meta(g.inputs()[i]);
    TR_CHECK(m.known, ValueError, "program_to_json: input {} has no recorded shape", input_names[i]);
    j["inputs"].push_back({{"value", g.inputs()[i]}, {"name", input_names[i]}, {"sizes", sizes_json(m.sizes)},
                           {"dtype", dtype_name(m.dtype)}});
  }
  j["constants"] = json::array();
  for (size_t i = 0; i < g.constants().size(); ++i)
    j["constants"].push_back({{"value", g.constants()[i].first}, {"name", constant_names[i]}});
  j["outputs"] = g.outputs();
  j["nodes"] = json::array();
  for (const CapturedGraph::Node& n : g.nodes()) {
    json node;
    TR_CHECK(!n.grad_enabled, ValueError, "program_to_json: the program records autograd (export runs under no_grad)");
    TR_CHECK(n.external == nullptr, ValueError,
             "aot_compile: the program calls '{}', a custom op written in Python; a package cannot hold Python code",
             n.name());
    if (n.fused != nullptr) {
      const FusedKernel& k = *n.fused;
      TR_CHECK(k.device.is_cpu(), ValueError,
               "aot_compile: the program has a fused loop on {} ({}); packages hold CPU loops only: export on the "
               "CPU, or with TRAINRUN_COMPILE_FUSION=0", k.device.str(), k.name);
      json kinds = json::array(), outs = json::array();
      for (auto kind : k.inputs) kinds.push_back(kind_name(kind));
      for (const IntList& s : k.output_sizes) outs.push_back(sizes_json(s));
      node["fused"] = {{"name", k.name}, {"ops", k.ops}, {"inputs", kinds}, {"rows", k.rows}, {"cols", k.cols},
                       {"output_sizes", outs}};
    } else if (n.op == nullptr) {
      node["alloc"] = {{"sizes", sizes_json(n.alloc_sizes)}, {"strides", sizes_json(n.alloc_strides)},
                       {"dtype", dtype_name(n.alloc_dtype)}, {"device", n.alloc_device.str()}};
    } else {
      node["op"] = n.op->name();
      if (n.random_elements >= 0) node["random_elements"] = n.random_elements;
    }
    node["args"] = json::array();
    for (const Slot& s : n.args) node["args"].push_back(slot_to_json(s));
    node["results"] = json::array();
    for (const Slot& s : n.results) node["results"].push_back(slot_to_json(s));
    j["nodes"].push_back(std::move(node));
  }
  if (dynamic != nullptr) {
    TR_CHECK(dynamic->base().get() == &g, ValueError, "program_to_json: the dynamic program is another graph's");
    j["dynamic"] = dynamic->to_json();
  }
  return j;
}

LoadedProgram program_from_json(const json& j, const std::map<std::string, Tensor>& weights,
                                const std::function<FusedKernel::Fn(const std::string&)>& loop,
                                const std::shared_ptr<void>& library) {
  TR_CHECK(j.value("format", "") == "trainrun.program/1", ValueError,
           "program: format '{}', this build reads 'trainrun.program/1'", j.value("format", ""));
  LoadedProgram out;
  std::vector<int> inputs;
  for (const json& in : j.at("inputs")) {
    inputs.push_back(in.at("value").get<int>());
    out.inputs.push_back({in.at("name").get<std::string>(), sizes_of(in.at("sizes")),
                          dtype_from_name(in.at("dtype").get<std::string>())});
  }
  std::vector<std::pair<int, Tensor>> constants;
  for (const json& c : j.at("constants")) {
    const std::string name = c.at("name").get<std::string>();
    auto it = weights.find(name);
    TR_CHECK(it != weights.end(), ValueError, "program: the weights have no tensor '{}'", name);
    constants.emplace_back(c.at("value").get<int>(), it->second);
  }
  std::vector<CapturedGraph::Node> nodes;
  for (const json& jn : j.at("nodes")) {
    CapturedGraph::Node n;
    n.grad_enabled = false;
    if (jn.contains("fused")) {
      const json& f = jn.at("fused");
      auto k = std::make_shared<FusedKernel>();
      k->name = f.at("name").get<std::string>();
      k->ops = f.at("ops").get<std::vector<std::string>>();
      for (const json& kind : f.at("inputs")) k->inputs.push_back(kind_of(kind.get<std::string>()));
      k->rows = f.at("rows").get<int64_t>();
      k->cols = f.at("cols").get<int64_t>();
      for (const json& s : f.at("output_sizes")) k->output_sizes.push_back(sizes_of(s));
      k->fn = loop(k->name);
      TR_CHECK(k->fn != nullptr, ValueError, "program: no fused loop '{}' in the package's library", k->name);
      k->library = library;
      n.fused = std::move(k);
    } else if (jn.contains("alloc")) {
      const json& a = jn.at("alloc");
      n.alloc_sizes = sizes_of(a.at("sizes"));
      n.alloc_strides = sizes_of(a.at("strides"));
      n.alloc_dtype = dtype_from_name(a.at("dtype").get<std::string>());
      n.alloc_device = Device(a.at("device").get<std::string>());
    } else {
      const std::string name = jn.at("op").get<std::string>();
      n.op = Dispatcher::get().find(name);
      TR_CHECK(n.op != nullptr, ValueError, "program: it calls op '{}', which this build of trainrun does not have",
               name);
      n.random_elements = jn.value("random_elements", int64_t{-1});
    }
    for (const json& s : jn.at("args")) n.args.push_back(slot_from_json(s));
    for (const json& s : jn.at("results")) n.results.push_back(slot_from_json(s));
    nodes.push_back(std::move(n));
  }
  out.graph = CapturedGraph::assemble(j.at("num_values").get<int>(), std::move(inputs), std::move(constants),
                                      std::move(nodes), j.at("outputs").get<std::vector<int>>());
  for (size_t i = 0; i < out.inputs.size(); ++i) {  // (contiguous on the CPU: how they were exported)
    const ProgramInput& in = out.inputs[i];
    IntList strides(in.sizes.size(), 1);
    for (size_t d = in.sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * in.sizes[d];
    out.graph->set_meta(out.graph->inputs()[i], {true, in.sizes, strides, in.dtype, Device(DeviceType::CPU)});
  }
  if (j.contains("dynamic")) out.dynamic = DynamicProgram::from_json(j.at("dynamic"), out.graph);
  return out;
}

}  // namespace trainrun::compile
