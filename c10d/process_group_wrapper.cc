#include "c10d/process_group_wrapper.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <vector>

#include "base/error.h"
#include "c10d/flight_recorder.h"
#include "tensor/graph_break.h"
#include "tensor/record_function.h"

namespace trainrun {
namespace c10d {
namespace {

// "float32 [4, 2]"
std::string describe(const Tensor& t) { return fmt::format("{} {}", dtype_name(t.dtype()), t.shape_str()); }

// The message of a failure ("" for none).
std::string error_message(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an unknown error";
  }
}

std::string describe(const std::vector<Tensor>& list) {
  std::vector<std::string> parts;
  for (const Tensor& t : list) parts.push_back(describe(t));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// The work a wrapped collective returns. It completes when the backend's
// does, with the backend's error explained; wait() goes through the
// backend's work, so a GPU backend keeps its stream semantics (the caller's
// stream waits, the host does not).
class MonitoredWork final : public Work {
 public:
  explicit MonitoredWork(std::shared_ptr<Work> inner) : Work(inner->description()), inner_(std::move(inner)) {}

  void wait(std::optional<std::chrono::milliseconds> timeout) override {
    try {
      inner_->wait(timeout);
      // Done on the host (a CPU backend): our own completion follows at once,
      // from the backend's completion callback. A GPU backend's wait may
      // return before the host sees completion; then we do not block either.
      if (inner_->is_completed()) Work::wait(std::nullopt);
      return;
    } catch (const TimeoutError&) {
      if (!inner_->is_completed()) throw;  // the wait ran out; the work carries on
    } catch (...) {
    }
    // The backend's work failed: our own completion carries the explained error.
    Work::wait(std::nullopt);
  }

  void run_callback(const std::function<void()>& fn) override { inner_->run_callback(fn); }

 private:
  std::shared_ptr<Work> inner_;
};

}  // namespace

bool ProcessGroupWrapper::detail_debug_from_env() {
  const char* debug = std::getenv("TRAINRUN_DISTRIBUTED_DEBUG");
  return debug != nullptr && std::string(debug) == "DETAIL";
}

ProcessGroupWrapper::ProcessGroupWrapper(std::shared_ptr<ProcessGroup> backend, std::shared_ptr<Store> store,
                                         bool check_signatures)
    : ProcessGroup(backend ? backend->rank() : 0, backend ? backend->size() : 0, backend ? backend->name() : "",
                   backend ? backend->timeout() : Milliseconds(0)),
      backend_(std::move(backend)),
      store_(std::move(store)),
      check_signatures_(check_signatures) {
  TR_CHECK(backend_ && store_, ValueError, "ProcessGroupWrapper: give a backend group and its store");
  global_ranks_ = backend_->global_ranks();
  progress_ = std::make_shared<CollectiveProgress>(store_, rank_, size_);
}

ProcessGroupWrapper::~ProcessGroupWrapper() {
  // Works the backend fails while shutting down are not laggard cases.
  closing_->store(true);
}

namespace {

// PyTorch's profiler names for a collective: the call ("c10d::allreduce_", its op) and the work, from launch to
// completion ("gloo:all_reduce", as its backends record it).
std::pair<std::string, std::string> profiler_names(const CollectiveCall& what, const std::string& backend) {
  std::string op = what.name[0] != '\0' ? what.name : what.text.substr(0, what.text.find('('));
  std::string work = op == "allreduce"   ? "all_reduce"
                     : op == "allgather" ? "all_gather"
                     : op.rfind("alltoall", 0) == 0 ? "all_to_all"
                                                    : op;
  return {"c10d::" + op + (op == "barrier" ? "" : "_"), backend + ":" + work};
}

}  // namespace

std::shared_ptr<Work> ProcessGroupWrapper::collective(CollectiveCall what,
                                                      const std::function<std::shared_ptr<Work>()>& call) {
  note_graph_break("a collective ran (collectives stay outside compiled graphs)");
  const uint32_t seq = ++next_seq_;
  progress_->entered(seq);
  if (check_signatures_) check_signature(seq, what.format());
  // While a profiler records: the call as one event, and the work from launch to completion as another.
  const bool profiled = profiling::active();
  std::string work_event;
  int64_t launched = 0, thread = 0;
  std::optional<profiling::Range> launch;
  if (profiled) {
    auto [call_event, work_name] = profiler_names(what, backend_->backend_name());
    work_event = std::move(work_name);
    launched = profiling::now_ns();
    thread = profiling::current_thread();
    launch.emplace(std::move(call_event));
  }
  std::shared_ptr<Work> inner = call();
  launch.reset();
  FlightRecorder& recorder = FlightRecorder::global();
  const uint64_t record_id =
      recorder.enabled()
          ? recorder.record(recorder_group(), seq, FlightRecorder::Kind::Collective, std::move(what), inner)
          : 0;
  auto outer = std::make_shared<MonitoredWork>(inner);
  // The callback holds what explaining needs, not the wrapper: the group may
  // be destroyed before its works complete.
  std::weak_ptr<Work> weak_outer = outer;
  inner->on_completion(
      [weak_outer, inner, seq, record_id, progress = progress_, closing = closing_, timeout = timeout_,
       work_event = std::move(work_event), launched, thread] {
        if (!work_event.empty()) profiling::add_event(work_event, launched, profiling::now_ns(), thread);
        std::exception_ptr error = inner->exception();
        FlightRecorder::global().completed(record_id, inner->started_ns(), error_message(error));
        auto outer = weak_outer.lock();
        if (!outer) return;
        if (error && !closing->load()) error = explain(error, seq, *progress, timeout);
        outer->finish(error);
      });
  return outer;
}

int ProcessGroupWrapper::recorder_group() {
  int id = recorder_group_.load(std::memory_order_acquire);
  if (id >= 0) return id;
  // Two threads may race here at a group's first operation: the loser's registration stays unused.
  id = FlightRecorder::global().register_group(name_, backend_->backend_name(), global_ranks_);
  int expected = -1;
  return recorder_group_.compare_exchange_strong(expected, id) ? id : expected;
}

std::shared_ptr<Work> ProcessGroupWrapper::recorded_p2p(CollectiveCall what, std::shared_ptr<Work> work) {
  note_graph_break("a send or receive ran (point-to-point calls stay outside compiled graphs)");
  FlightRecorder& recorder = FlightRecorder::global();
  if (!recorder.enabled()) return work;
  const uint64_t id =
      recorder.record(recorder_group(), ++next_p2p_seq_, FlightRecorder::Kind::PointToPoint, std::move(what), work);
  work->on_completion([id, weak = std::weak_ptr<Work>(work)] {
    auto w = weak.lock();
    FlightRecorder::global().completed(id, w ? w->started_ns() : 0, w ? error_message(w->exception()) : "");
  });
  return work;
}

std::exception_ptr ProcessGroupWrapper::explain(std::exception_ptr error, uint32_t seq, CollectiveProgress& progress,
                                                Milliseconds timeout) {
  // A dead rank never reaches `seq`; a live one that is late gets a short
  // grace to show up.
  const auto grace = std::min<Milliseconds>(std::max<Milliseconds>(timeout / 10, Milliseconds(200)), Milliseconds(2000));
  // Every rank dumps its flight record (when the launcher asked for dumps), so the agent can say who is behind.
  try {
    std::rethrow_exception(error);
  } catch (const DistBackendError& e) {
    std::string message = fmt::format("{}; {}", e.what(), progress.laggards(seq, grace));
    FlightRecorder::global().dump_everywhere(message);
    return std::make_exception_ptr(DistBackendError(message));
  } catch (const TimeoutError& e) {
    std::string message = fmt::format("{}; {}", e.what(), progress.laggards(seq, grace));
    FlightRecorder::global().dump_everywhere(message);
    return std::make_exception_ptr(TimeoutError(message));
  } catch (...) {
    return error;  // bad input and the like: its own type and message
  }
}

void ProcessGroupWrapper::check_signature(uint32_t seq, const std::string& signature) {
  const std::string prefix = fmt::format("signature/{}/", seq);
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(prefix + std::to_string(r));
  store_->set(keys[rank_], to_bytes(signature));
  try {
    store_->wait(keys, timeout_);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r)
      if (!store_->check({keys[r]})) missing.push_back(r);
    throw DistBackendError(fmt::format(
        "collective #{} on group '{}' ({}): ranks {} did not call a collective #{} within the group timeout of {} ms",
        seq, name_, signature, fmt::join(missing, ", "), seq, timeout_.count()));
  }
  const std::vector<Bytes> all = store_->multi_get(keys);
  // The last rank to have read the signatures removes them.
  if (store_->add(prefix + "read", 1) == size_) {
    for (const std::string& k : keys) store_->delete_key(k);
    store_->delete_key(prefix + "read");
  }
  for (int r = 0; r < size_; ++r) {
    const std::string theirs = to_string(all[r]);
    if (theirs != signature)
      throw DistBackendError(fmt::format(
          "collective #{} on group '{}' does not match across ranks: rank {} called {} but rank {} called {}", seq,
          name_, rank_, signature, r, theirs));
  }
}

std::shared_ptr<Work> ProcessGroupWrapper::allreduce(Tensor& tensor, ReduceOp op) {
  return collective(CollectiveCall("allreduce", tensor).with_reduce(op),
                    [&] { return backend_->allreduce(tensor, op); });
}

std::shared_ptr<Work> ProcessGroupWrapper::allreduce_coalesced(std::vector<Tensor>& tensors, ReduceOp op) {
  return collective(list_call(fmt::format("allreduce_coalesced({}, {})", describe(tensors), op.name())),
                    [&] { return backend_->allreduce_coalesced(tensors, op); });
}

std::shared_ptr<Work> ProcessGroupWrapper::broadcast(Tensor& tensor, int root) {
  return collective(CollectiveCall("broadcast", tensor).with_root(root),
                    [&] { return backend_->broadcast(tensor, root); });
}

std::shared_ptr<Work> ProcessGroupWrapper::reduce(Tensor& tensor, int root, ReduceOp op) {
  return collective(CollectiveCall("reduce", tensor).with_root(root).with_reduce(op),
                    [&] { return backend_->reduce(tensor, root, op); });
}

std::shared_ptr<Work> ProcessGroupWrapper::allgather(std::vector<Tensor>& outputs, const Tensor& input) {
  return collective(CollectiveCall("allgather", input), [&] { return backend_->allgather(outputs, input); });
}

std::shared_ptr<Work> ProcessGroupWrapper::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  return collective(CollectiveCall("all_gather_into_tensor", input),
                    [&] { return backend_->all_gather_into_tensor(output, input); });
}

std::shared_ptr<Work> ProcessGroupWrapper::reduce_scatter(Tensor& output, std::vector<Tensor>& inputs, ReduceOp op) {
  return collective(CollectiveCall("reduce_scatter", output).with_reduce(op),
                    [&] { return backend_->reduce_scatter(output, inputs, op); });
}

std::shared_ptr<Work> ProcessGroupWrapper::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) {
  return collective(CollectiveCall("reduce_scatter_tensor", output).with_reduce(op),
                    [&] { return backend_->reduce_scatter_tensor(output, input, op); });
}

std::shared_ptr<Work> ProcessGroupWrapper::alltoall_base(Tensor& output, const Tensor& input,
                                                         const IntList& output_splits, const IntList& input_splits) {
  // Splits differ between ranks by design; only dtype and trailing shape must agree.
  IntList rest(input.sizes().begin() + std::min<size_t>(1, input.sizes().size()), input.sizes().end());
  return collective(
      list_call(fmt::format("alltoall_base({}, rows of [{}])", dtype_name(input.dtype()), fmt::join(rest, ", "))),
      [&] { return backend_->alltoall_base(output, input, output_splits, input_splits); });
}

std::shared_ptr<Work> ProcessGroupWrapper::alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs) {
  return collective(
      list_call(fmt::format("alltoall({} x {})", inputs.size(), inputs.empty() ? "" : dtype_name(inputs[0].dtype()))),
      [&] { return backend_->alltoall(outputs, inputs); });
}

std::shared_ptr<Work> ProcessGroupWrapper::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  return collective(CollectiveCall("gather", input).with_root(root),
                    [&] { return backend_->gather(outputs, input, root); });
}

std::shared_ptr<Work> ProcessGroupWrapper::scatter(Tensor& output, std::vector<Tensor>& inputs, int root) {
  return collective(CollectiveCall("scatter", output).with_root(root),
                    [&] { return backend_->scatter(output, inputs, root); });
}

std::shared_ptr<Work> ProcessGroupWrapper::barrier() {
  return collective(CollectiveCall("barrier"), [&] { return backend_->barrier(); });
}

std::shared_ptr<Work> ProcessGroupWrapper::allgather_into_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                           std::vector<Tensor>& inputs) {
  return collective(list_call(fmt::format("allgather_into_tensor_coalesced({})", describe(inputs))),
                    [&] { return backend_->allgather_into_tensor_coalesced(outputs, inputs); });
}

std::shared_ptr<Work> ProcessGroupWrapper::reduce_scatter_tensor_coalesced(std::vector<Tensor>& outputs,
                                                                           std::vector<Tensor>& inputs, ReduceOp op) {
  return collective(list_call(fmt::format("reduce_scatter_tensor_coalesced({}, {})", describe(outputs), op.name())),
                    [&] { return backend_->reduce_scatter_tensor_coalesced(outputs, inputs, op); });
}

std::shared_ptr<Work> ProcessGroupWrapper::send(const Tensor& tensor, int dst, int tag) {
  auto work = backend_->send(tensor, dst, tag);
  return recorded_p2p(CollectiveCall("send", tensor).with_peer(dst, tag), std::move(work));
}

std::shared_ptr<Work> ProcessGroupWrapper::recv(Tensor& tensor, int src, int tag) {
  auto work = backend_->recv(tensor, src, tag);
  return recorded_p2p(CollectiveCall("recv", tensor).with_peer(src, tag), std::move(work));
}

std::shared_ptr<Work> ProcessGroupWrapper::recv_anysource(Tensor& tensor, int tag) {
  auto work = backend_->recv_anysource(tensor, tag);
  return recorded_p2p(CollectiveCall("recv", tensor).with_peer(-2, tag), std::move(work));
}

std::vector<std::shared_ptr<Work>> ProcessGroupWrapper::batch_isend_irecv(std::vector<P2POp>& ops) {
  std::vector<std::shared_ptr<Work>> works = backend_->batch_isend_irecv(ops);
  for (size_t i = 0; i < works.size() && i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    works[i] =
        recorded_p2p(CollectiveCall(op.kind == P2POp::SEND ? "send" : "recv", op.tensor).with_peer(op.peer, op.tag),
                     std::move(works[i]));
  }
  return works;
}

}  // namespace c10d
}  // namespace trainrun
