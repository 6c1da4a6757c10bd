#include "compile/graph_capture.h"

#include <fmt/format.h>

#include <mutex>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "base/error.h"
#include "tensor/generator.h"
#include "tensor/graph_break.h"
#include "tensor/op_schemas.h"

namespace trainrun::compile {
namespace {

thread_local GraphCapture* t_capture = nullptr;

// Per op, which of its arguments it writes (schema `Tensor(a!)`, or the trailing `Tensor? out`) and whether
// it is a view; from the op list (an op not in it, a C++ custom op: it writes nothing and is no view).
struct OpEffects {
  std::vector<bool> writes;
  bool view = false;
};

const OpEffects& effects_of(const OpTable& op) {
  static std::mutex mu;
  static std::unordered_map<const OpTable*, OpEffects> known;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(&op); it != known.end()) return it->second;
  OpEffects e;
  for (const OpListEntry& entry : op_list()) {
    if (op.name() != entry.name) continue;
    e.view = entry.view;
    const std::string schema = entry.schema;
    const size_t open = schema.find('('), arrow = schema.find("->");
    const size_t close = schema.rfind(')', arrow);
    std::string args = schema.substr(open + 1, close - open - 1);
    std::vector<std::string> parts;
    int depth = 0;
    std::string cur;
    for (char c : args) {  // (top-level commas: "Tensor(a!)" holds no comma, defaults like "int[] dims=[]" may)
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (c == ',' && depth == 0) {
        parts.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) parts.push_back(cur);
    for (std::string part : parts) {
      part.erase(0, part.find_first_not_of(' '));
      if (part == "*") continue;
      e.writes.push_back(part.find("!)") != std::string::npos || part.rfind("Tensor? out", 0) == 0);
    }
    break;
  }
  return known.emplace(&op, std::move(e)).first->second;
}

}  // namespace

// The one fallback of the Tracing key, installed at the first capture: it
// records for the capture of the calling thread and lets every op run.
struct CaptureFallback {
  static void install() {
    static std::once_flag once;
    std::call_once(once, [] {
      KeyFallback f;
      f.kind = KeyFallback::Boxed;
      f.unboxable_falls_through = true;
      f.on_unboxable_fallthrough = [](const OpTable& op) {
        if (t_capture != nullptr) t_capture->stop(fmt::format("op '{}' has no boxed form, so it cannot be recorded",
                                                              op.name()));
      };
      f.kernel = [](const OpTable& op, DispatchKey key, DispatchKeySet keys, Stack& stack) {
        if (t_capture == nullptr || t_capture->finished_ || t_capture->broken()) {
          op.redispatch_boxed(key, keys, stack);
          return;
        }
        t_capture->record(op, key, keys, stack);
      };
      Dispatcher::get().set_fallback(DispatchKey::Tracing, std::move(f));
    });
  }
};

GraphCapture::GraphCapture(CapturedGraph& graph, const std::vector<Tensor>& inputs, const GraphCapture& forward)
    : GraphCapture(graph, inputs, &forward) {}

GraphCapture::GraphCapture(CapturedGraph& graph, const std::vector<Tensor>& inputs)
    : GraphCapture(graph, inputs, nullptr) {}

GraphCapture::GraphCapture(CapturedGraph& graph, const std::vector<Tensor>& inputs, const GraphCapture* forward)
    : graph_(graph), outer_(t_capture), forward_(forward) {
  CaptureFallback::install();
  if (forward_ != nullptr) {
    TR_CHECK(outer_ == forward_ && forward_->finished_, ValueError,
             "graph capture: a backward is recorded inside its finished forward recording");
  } else {
    TR_CHECK(outer_ == nullptr, ValueError, "graph capture: a compiled call inside another one's capture on the same "
                                            "thread is not supported");
  }
  for (const Tensor& t : inputs) {
    const int id = graph_.add_input();
    if (t.defined() && ids_.count(t.impl()) == 0) bind(t, id);  // the same tensor twice: its first position names it
  }
  t_capture = this;
  graph_break_hook() = [](const std::string& reason) { GraphCapture::note_graph_break(reason); };
  tensor_allocated_hook() = [](const Tensor& t) {
    if (t_capture != nullptr) t_capture->allocated(t);
  };
  saved_included_ = tls_included_keys();
  tls_included_keys() = saved_included_ | DispatchKeySet(DispatchKey::Tracing);
}

GraphCapture::~GraphCapture() {
  t_capture = outer_;
  tls_included_keys() = saved_included_;
}

void GraphCapture::stop(std::string reason) {
  if (break_reason_.empty()) break_reason_ = std::move(reason);
}

void GraphCapture::note_graph_break(const std::string& reason) {
  if (t_capture != nullptr && !t_capture->finished_ && t_capture->external_ == 0) t_capture->stop(reason);
}

void GraphCapture::note_shape_read(const Tensor& t) {
  GraphCapture* c = t_capture;
  if (c == nullptr || c->value_shaped_.empty() || c->finished_ || c->external_ > 0 || !t.defined()) return;
  auto it = c->ids_.find(t.impl());
  if (it != c->ids_.end() && c->value_shaped_.count(it->second))
    c->stop("Python read the shape of a tensor whose shape depends on the data (made by nonzero, masked_select or "
            "boolean indexing): a replay would keep the recorded size");
}

bool GraphCapture::active() {
  return t_capture != nullptr && !t_capture->finished_ && !t_capture->broken() && t_capture->external_ == 0;
}

void GraphCapture::begin_external() {
  if (t_capture != nullptr) ++t_capture->external_;
}

void GraphCapture::abort_external() {
  if (t_capture != nullptr && t_capture->external_ > 0) --t_capture->external_;
}

void GraphCapture::end_external(std::shared_ptr<const ExternalCall> call, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& outputs) {
  GraphCapture* c = t_capture;
  if (c == nullptr || c->external_ == 0) return;
  if (--c->external_ > 0 || c->finished_ || c->broken()) return;
  CapturedGraph::Node node;
  node.external = std::move(call);
  node.grad_enabled = GradMode::is_enabled();
  for (const Tensor& t : inputs) {
    CapturedGraph::Slot s;
    s.kind = CapturedGraph::Slot::Value;
    s.value = c->value_of(t);
    c->check_read(s.value, fmt::format("custom op '{}'", node.external->name()));
    node.args.push_back(s);
  }
  for (const Tensor& t : outputs) {
    CapturedGraph::Slot s;
    s.kind = CapturedGraph::Slot::Value;
    s.value = c->result_of(t);
    node.results.push_back(s);
  }
  c->graph_.add_node(std::move(node));
}

int GraphCapture::bind(const Tensor& t, int id) {
  ids_[t.impl()] = id;
  graph_.set_meta(id, t);
  alive_.push_back(t);
  return id;
}

int GraphCapture::find(const Tensor& t) const {
  auto it = ids_.find(t.impl());
  if (it != ids_.end()) return it->second;
  const TensorImpl& a = *t.impl();
  for (const Tensor& known : alive_) {  // (only at recording, for saved outputs: a scan is fine)
    const TensorImpl& b = *known.impl();
    if (a.storage().get() == b.storage().get() && a.storage_offset() == b.storage_offset() &&
        a.sizes() == b.sizes() && a.strides() == b.strides() && a.dtype() == b.dtype())
      return ids_.at(known.impl());
  }
  return -1;
}

int GraphCapture::value_of(const Tensor& t) {
  auto it = ids_.find(t.impl());
  if (it != ids_.end()) return it->second;
  if (forward_ != nullptr) {  // a backward formula reads a tensor of the forward call: the run passes it in
    const int forward_id = forward_->find(t);
    if (forward_id < 0) {
      stop("the backward read a tensor the forward call neither made nor read");
      return bind(t, graph_.add_constant(t));
    }
    saved_.push_back(forward_id);
    return bind(t, graph_.add_input());
  }
  // Unknown: made before the call (a parameter) or outside the dispatcher, read when the graph runs.
  return bind(t, graph_.add_constant(t));
}

int GraphCapture::result_of(const Tensor& t) {
  auto it = ids_.find(t.impl());
  return it != ids_.end() ? it->second : bind(t, graph_.new_value());  // (an in-place op returns its argument)
}

CapturedGraph::Slot GraphCapture::slot_of(const IValue& v) {
  CapturedGraph::Slot s;
  IValue& value = const_cast<IValue&>(v);
  if (v.is_tensor() && value.get<Tensor>().defined()) {
    s.kind = CapturedGraph::Slot::Value;
    s.value = value_of(value.get<Tensor>());
  } else if (v.is_tensor_list()) {
    s.kind = CapturedGraph::Slot::ValueList;
    for (const Tensor& t : value.get<std::vector<Tensor>>()) s.values.push_back(value_of(t));
  } else {
    s.constant = v;
  }
  return s;
}

void GraphCapture::record(const OpTable& op, DispatchKey key, DispatchKeySet keys, Stack& stack) {
  if (depth_ > 0 || external_ > 0) {  // inside a recorded op's kernel, or an external call: theirs
    op.redispatch_boxed(key, keys, stack);
    return;
  }
  if (forward_ == nullptr && autograd::in_backward_pass()) {
    stop("the call ran a backward pass (only the forward program is captured; run backward() outside the "
         "compiled function)");
    op.redispatch_boxed(key, keys, stack);
    return;
  }
  CapturedGraph::Node node;
  node.op = &op;
  node.grad_enabled = GradMode::is_enabled();
  for (const IValue& a : stack) node.args.push_back(slot_of(a));
  int views_of = -1;
  if (!unwritten_.empty()) check_unwritten(op, node.args, &views_of);
  if (op.name() == "random_fill_") {
    // Dropout and the random factories draw from the default generator: (seed, offset) are what it gave this
    // call, and a run must ask it again. A draw it cannot repeat so (another generator) is not recorded.
    Tensor& target = stack[0].get<Tensor>();
    const Generator& gen = default_generator();
    const auto seed = static_cast<uint64_t>(stack[4].get<int64_t>());
    const auto offset = static_cast<uint64_t>(stack[5].get<int64_t>());
    if (seed != gen.seed() || offset + static_cast<uint64_t>(target.numel()) != gen.offset()) {
      stop("a random draw came from a generator other than the default one (or from part of a draw), which a "
           "run cannot repeat");
      op.redispatch_boxed(key, keys, stack);
      return;
    }
    node.random_elements = target.numel();
  }
  ++depth_;
  struct Leave {
    int& depth;
    ~Leave() { --depth; }
  } leave{depth_};
  op.redispatch_boxed(key, keys, stack);
  for (IValue& r : stack) {
    CapturedGraph::Slot s;
    if (r.is_tensor()) {
      if (r.get<Tensor>().defined()) {  // (an undefined result stays a constant slot: nothing to bind)
        s.kind = CapturedGraph::Slot::Value;
        s.value = result_of(r.get<Tensor>());
      }
    } else if (r.is_tensor_list()) {
      s.kind = CapturedGraph::Slot::ValueList;
      for (const Tensor& t : r.get<std::vector<Tensor>>()) s.values.push_back(result_of(t));
    } else {
      stop(fmt::format("op '{}' returned a {} (a value computed from the data)", op.name(), r.type_name()));
      return;
    }
    node.results.push_back(std::move(s));
  }
  if (views_of >= 0)
    for (const CapturedGraph::Slot& s : node.results)
      if (s.kind == CapturedGraph::Slot::Value) unwritten_[s.value] = views_of;
  bool value_shaped = op.name() == "nonzero" || op.name() == "masked_select";
  for (const CapturedGraph::Slot& a : node.args) {
    if (value_shaped || value_shaped_.empty()) break;
    if (a.kind == CapturedGraph::Slot::Value) value_shaped = value_shaped_.count(a.value) > 0;
    for (int v : a.values) value_shaped = value_shaped || value_shaped_.count(v) > 0;
  }
  if (value_shaped)
    for (const CapturedGraph::Slot& s : node.results) {
      if (s.kind == CapturedGraph::Slot::Value) value_shaped_.insert(s.value);
      for (int v : s.values) value_shaped_.insert(v);
    }
  graph_.add_node(std::move(node));
}

void GraphCapture::check_read(int value, const std::string& by) {
  auto it = unwritten_.find(value);
  if (it == unwritten_.end() || open_groups_.count(it->second) == 0) return;
  stop(fmt::format("{} reads a tensor the call made whose values no recorded op wrote (a factory that fills "
                   "memory directly, such as tensor(data)): a replay would read an empty allocation",
                   by));
}

void GraphCapture::check_unwritten(const OpTable& op, const std::vector<CapturedGraph::Slot>& args, int* views_of) {
  const OpEffects& effects = effects_of(op);
  for (size_t i = 0; i < args.size(); ++i) {
    const CapturedGraph::Slot& a = args[i];
    std::vector<int> values = a.kind == CapturedGraph::Slot::Value ? std::vector<int>{a.value} : a.values;
    for (int v : values) {
      auto it = unwritten_.find(v);
      if (it == unwritten_.end() || open_groups_.count(it->second) == 0) continue;
      if (i < effects.writes.size() && effects.writes[i]) {
        open_groups_.erase(it->second);  // (written: from now on its values are the op's)
      } else if (effects.view && i == 0) {
        *views_of = it->second;
      } else {
        check_read(v, fmt::format("op '{}'", op.name()));
      }
    }
  }
}

void GraphCapture::allocated(const Tensor& t) {
  if (depth_ > 0 || external_ > 0 || finished_ || broken()) return;
  CapturedGraph::Node node;
  node.grad_enabled = GradMode::is_enabled();
  node.alloc_sizes = t.sizes();
  node.alloc_strides = t.strides();
  node.alloc_dtype = t.dtype();
  node.alloc_device = t.device();
  CapturedGraph::Slot s;
  s.kind = CapturedGraph::Slot::Value;
  s.value = bind(t, graph_.new_value());
  unwritten_[s.value] = s.value;
  open_groups_.insert(s.value);
  node.results.push_back(std::move(s));
  graph_.add_node(std::move(node));
}

void GraphCapture::finish(const std::vector<Tensor>& outputs) {
  std::vector<int> ids;
  for (const Tensor& t : outputs) ids.push_back(t.defined() ? value_of(t) : -1);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= 0) check_read(ids[i], fmt::format("output {}", i));
  graph_.set_outputs(std::move(ids));
  finished_ = true;
}

}  // namespace trainrun::compile
