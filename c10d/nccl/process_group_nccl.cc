#include "c10d/nccl/process_group_nccl.h"

#include <cstdlib>
#include <cstring>

#include "c10d/distributed.h"
#include "c10d/nccl/nccl_types.h"
#include "tensor/cuda/cuda_allocator.h"
#include "tensor/cuda/runtime.h"
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/views.h"

namespace trainrun {
namespace c10d {
namespace {


bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "True") == 0);
}

}  // namespace

ProcessGroupNCCL::ProcessGroupNCCL(std::shared_ptr<Store> store, int rank, int size, std::string name, Options options)
    : ProcessGroup(rank, size, std::move(name), options.timeout), store_(std::move(store)), options_(options) {
  TR_CHECK(size >= 1 && rank >= 0 && rank < size, ValueError, "ProcessGroupNCCL: rank {} is not in [0, {})", rank,
           size);
  if (env_flag("TRAINRUN_NCCL_BLOCKING_WAIT")) options_.blocking_wait = true;
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy = !pending_.empty();
  }
  if (busy) {
    abort_group(fmt::format("group '{}' was destroyed while collectives were still running", name_));
    return;
  }
  std::lock_guard<std::mutex> lock(comms_mu_);
  for (auto& [device, dc] : comms_) {
    // Idle: finalize (flushes NCCL's own state), then free; abort if it hangs.
    ncclResult_t r = ncclCommFinalize(dc.comm);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    ncclResult_t state = r;
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ncclCommGetAsyncError(dc.comm, &state);
    }
    if (state == ncclSuccess) ncclCommDestroy(dc.comm);
    else ncclCommAbort(dc.comm);
  }
  comms_.clear();
}

void ProcessGroupNCCL::enqueued(ncclComm* comm, int result_in, const std::string& what) {
  ncclResult_t result = static_cast<ncclResult_t>(result_in);
  check_nccl(result, what, comm);
  const auto deadline = deadline_after(timeout_);
  while (result == ncclInProgress) {
    TR_CHECK(Clock::now() < deadline, DistBackendError, "{}: NCCL did not accept the call within {} ms", what,
             timeout_.count());
    std::this_thread::yield();
    ncclCommGetAsyncError(comm, &result);
    check_nccl(result, what, comm);
  }
}

ProcessGroupNCCL::DeviceComm& ProcessGroupNCCL::comm_for(int device) {
  auto it = comms_.find(device);
  if (it != comms_.end()) return it->second;
  // Every rank creates its communicators in the same order (that of its
  // first collective per device), so the n-th one shares the n-th id.
  const std::string key = fmt::format("nccl/unique_id/{}", comms_created_++);
  ncclUniqueId id;
  const std::string what = fmt::format("group '{}' (rank {} of {}): creating the NCCL communicator on cuda:{}", name_,
                                       rank_, size_, device);
  if (rank_ == 0) {
    check_nccl(ncclGetUniqueId(&id), what);
    store_->set(key, Bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id)));
  } else {
    Bytes b = store_->get(key);
    TR_CHECK(b.size() == sizeof(id), DistBackendError, "{}: the unique id under '{}' has {} bytes, expected {}", what,
             key, b.size(), sizeof(id));
    std::memcpy(&id, b.data(), sizeof(id));
  }
  cuda::DeviceGuard guard(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that a rank that never joins cannot hang us: we poll with a deadline
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
  check_nccl(r, what, comm);
  const auto deadline = deadline_after(timeout_);
  while (r == ncclInProgress) {
    if (Clock::now() >= deadline) {
      ncclCommAbort(comm);
      throw DistBackendError(fmt::format("{}: not all {} ranks joined within {} ms (rank 0 publishes the id under "
                                         "'{}'; every rank must run a collective on this group)",
                                         what, size_, timeout_.count(), key));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ncclCommGetAsyncError(comm, &r);
    check_nccl(r, what, comm);
  }
  cuda::Stream stream = cuda::stream_from_pool(device, options_.high_priority_stream);
  return comms_.emplace(device, DeviceComm{comm, stream}).first->second;
}

std::shared_ptr<Work> ProcessGroupNCCL::run(const char* op, const std::vector<Tensor>& tensors, const Enqueue& enqueue,
                                            bool cpu_wait) {
  TR_CHECK(!tensors.empty(), ValueError, "{} on group '{}': no tensors", op, name_);
  int device = -1;
  for (const Tensor& t : tensors) {
    TR_CHECK(t.defined(), ValueError, "{} on group '{}': a tensor is undefined", op, name_);
    TR_CHECK(t.is_cuda(), TypeError,
             "{} on group '{}' (nccl): expected CUDA tensors, got one on {} (the gloo backend takes CPU tensors)", op,
             name_, t.device().str());
    if (device < 0) device = t.device().index;
    TR_CHECK(t.device().index == device, ValueError, "{} on group '{}': tensors on cuda:{} and cuda:{}; use one device",
             op, name_, device, t.device().index);
    TR_CHECK(t.is_contiguous(), ValueError, "{} on group '{}' (nccl): tensors must be contiguous, got shape {}", op,
             name_, t.shape_str());
  }
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TR_CHECK(aborted_.empty(), DistBackendError, "{} on group '{}': its NCCL communicators were aborted after: {}", op,
             name_, aborted_);
    seq = ++next_seq_;
  }
  auto work = std::make_shared<WorkNCCL>(fmt::format("{} #{} on group '{}' (rank {} of {})", op, seq, name_, rank_,
                                                     size_),
                                         device, cpu_wait || options_.blocking_wait, timeout_);
  {
    std::lock_guard<std::mutex> lock(comms_mu_);
    DeviceComm& dc = comm_for(device);
    cuda::DeviceGuard guard(device);
    // The NCCL stream waits for what the caller queued on its tensors.
    cuda::Event ready;
    ready.record(cuda::current_stream(device));
    ready.block(dc.stream);
    {
      // Copies and buffers the op makes belong to the NCCL stream, and build no graph.
      cuda::StreamGuard on_nccl_stream(dc.stream);
      ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
      try {
        enqueue(dc.comm, dc.stream.handle());
      } catch (const Error& e) {
        throw DistBackendError(fmt::format("{}: {}", work->description(), e.what()));
      }
    }
    // The caller may free its tensors at once: their memory waits for this stream.
    for (const Tensor& t : tensors) cuda::record_stream(t, dc.stream);
    work->record_end(dc.stream, tensors);
  }
  // Queued on the NCCL stream: the flight recorder counts it as started (the
  // GPU may still be running what came before it).
  work->mark_started();
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(work);
  }
  cv_.notify_all();
  return work;
}

void ProcessGroupNCCL::watchdog_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (pending_.empty()) {
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      continue;
    }
    std::vector<std::shared_ptr<WorkNCCL>> snapshot(pending_.begin(), pending_.end());
    lock.unlock();
    std::vector<std::shared_ptr<WorkNCCL>> done;
    std::string failure;
    const auto now = Clock::now();
    for (const auto& w : snapshot) {
      bool finished = false;
      try {
        finished = w->gpu_done();
      } catch (const std::exception& e) {
        failure = fmt::format("{}: the GPU reported an error: {}", w->description(), e.what());
        break;
      }
      if (finished) {
        done.push_back(w);
      } else if (now - w->started() > timeout_) {
        failure = fmt::format(
            "{}: did not finish within the group's timeout of {} ms; its NCCL communicators were aborted. A peer "
            "rank may have died, hung, or issued a different collective",
            w->description(), timeout_.count());
        break;
      }
    }
    if (failure.empty()) {
      std::lock_guard<std::mutex> comms_lock(comms_mu_);
      for (auto& [device, dc] : comms_) {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(dc.comm, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
          failure = fmt::format("group '{}' (rank {} of {}): NCCL reported an error on cuda:{}: {} ({})", name_, rank_,
                                size_, device, ncclGetErrorString(state), ncclGetLastError(dc.comm));
          break;
        }
      }
    }
    for (const auto& w : done) w->complete(nullptr);  // callbacks run here, unlocked
    if (!failure.empty()) abort_group(failure);
    lock.lock();
    for (const auto& w : done) {
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (*it == w) {
          pending_.erase(it);
          break;
        }
      }
    }
    // Poll again soon: completions are seen within about a millisecond.
    cv_.wait_for(lock, std::chrono::microseconds(500), [&] { return stopping_; });
  }
}

void ProcessGroupNCCL::abort_group(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.empty()) aborted_ = reason;
  }
  {
    std::lock_guard<std::mutex> lock(comms_mu_);
    for (auto& [device, dc] : comms_) ncclCommAbort(dc.comm);
    comms_.clear();
  }
  std::deque<std::shared_ptr<WorkNCCL>> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed.swap(pending_);
  }
  for (const auto& w : failed) {
    // The work that timed out carries the reason itself; the others say why they fail.
    const bool is_cause = reason.rfind(w->description(), 0) == 0;
    w->complete(std::make_exception_ptr(
        DistBackendError(is_cause ? reason : w->description() + ": aborted because " + reason)));
  }
}

// ---- collectives ----

std::shared_ptr<Work> ProcessGroupNCCL::allreduce(Tensor& t, ReduceOp op) {
  NcclReduction::check(op, t.dtype(), "allreduce");
  return run("allreduce", {t}, [&](ncclComm* c, CUstream_st* s) {
    NcclReduction red(op, t.dtype(), c, "allreduce");
    enqueued(c, ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_dtype(t.dtype(), "allreduce"), red.op(), c,
                              s),
             "ncclAllReduce");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::allreduce_coalesced(std::vector<Tensor>& tensors, ReduceOp op) {
  for (const Tensor& t : tensors) NcclReduction::check(op, t.dtype(), "allreduce_coalesced");
  return run("allreduce_coalesced", tensors, [&](ncclComm* c, CUstream_st* s) {
    std::vector<std::unique_ptr<NcclReduction>> reds;
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (Tensor& t : tensors) {
      reds.push_back(std::make_unique<NcclReduction>(op, t.dtype(), c, "allreduce_coalesced"));
      check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_dtype(t.dtype(), "allreduce_coalesced"),
                               reds.back()->op(), c, s),
                 "ncclAllReduce", c);
    }
    enqueued(c, ncclGroupEnd(), "ncclGroupEnd");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::broadcast(Tensor& t, int root) {
  check_rank(root, "broadcast", "root");
  return run("broadcast", {t}, [&](ncclComm* c, CUstream_st* s) {
    enqueued(c, ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_dtype(t.dtype(), "broadcast"), root, c, s),
             "ncclBroadcast");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::reduce(Tensor& t, int root, ReduceOp op) {
  check_rank(root, "reduce", "root");
  NcclReduction::check(op, t.dtype(), "reduce");
  return run("reduce", {t}, [&](ncclComm* c, CUstream_st* s) {
    NcclReduction red(op, t.dtype(), c, "reduce");
    enqueued(c, ncclReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_dtype(t.dtype(), "reduce"), red.op(), root, c, s),
             "ncclReduce");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  TR_CHECK(output.numel() == input.numel() * size_ && output.dtype() == input.dtype(), ValueError,
           "all_gather_into_tensor on group '{}': output must hold {} inputs of {} {} elements, got {} {}", name_,
           size_, input.numel(), dtype_name(input.dtype()), output.numel(), dtype_name(output.dtype()));
  return run("all_gather_into_tensor", {output, input}, [&](ncclComm* c, CUstream_st* s) {
    enqueued(c, ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), nccl_dtype(input.dtype(), "allgather"),
                              c, s),
             "ncclAllGather");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::allgather(std::vector<Tensor>& outputs, const Tensor& input) {
  TR_CHECK(static_cast<int>(outputs.size()) == size_, ValueError,
           "allgather on group '{}': expected {} output tensors (one per rank), got {}", name_, size_, outputs.size());
  for (const Tensor& o : outputs)
    TR_CHECK(o.defined() && o.numel() == input.numel() && o.dtype() == input.dtype(), ValueError,
             "allgather on group '{}': every output must match the input ({} {}), got {}", name_, input.shape_str(),
             dtype_name(input.dtype()), o.defined() ? o.shape_str() : "undefined");
  std::vector<Tensor> all = outputs;
  all.push_back(input);
  return run("allgather", all, [&](ncclComm* c, CUstream_st* s) {
    const int64_t n = input.numel();
    Tensor flat = empty({n * size_}, TensorOptions(input.dtype(), input.device()));
    enqueued(c, ncclAllGather(input.data_ptr(), flat.data_ptr(), n, nccl_dtype(input.dtype(), "allgather"), c, s),
             "ncclAllGather");
    for (int r = 0; r < size_; ++r) outputs[r].copy_(flat.narrow(0, r * n, n).view(outputs[r].sizes()));
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) {
  TR_CHECK(input.numel() == output.numel() * size_ && output.dtype() == input.dtype(), ValueError,
           "reduce_scatter_tensor on group '{}': input must hold {} chunks of the output's {} {} elements, got {} {}",
           name_, size_, output.numel(), dtype_name(output.dtype()), input.numel(), dtype_name(input.dtype()));
  NcclReduction::check(op, input.dtype(), "reduce_scatter_tensor");
  return run("reduce_scatter_tensor", {output, input}, [&](ncclComm* c, CUstream_st* s) {
    NcclReduction red(op, input.dtype(), c, "reduce_scatter");
    enqueued(c, ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(),
                                  nccl_dtype(input.dtype(), "reduce_scatter"), red.op(), c, s),
             "ncclReduceScatter");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::reduce_scatter(Tensor& output, std::vector<Tensor>& inputs, ReduceOp op) {
  TR_CHECK(static_cast<int>(inputs.size()) == size_, ValueError,
           "reduce_scatter on group '{}': expected {} input tensors (one per rank), got {}", name_, size_,
           inputs.size());
  for (const Tensor& in : inputs)
    TR_CHECK(in.defined() && in.numel() == output.numel() && in.dtype() == output.dtype(), ValueError,
             "reduce_scatter on group '{}': every input must match the output ({} {})", name_, output.shape_str(),
             dtype_name(output.dtype()));
  std::vector<Tensor> all = inputs;
  all.push_back(output);
  return run("reduce_scatter", all, [&](ncclComm* c, CUstream_st* s) {
    const int64_t n = output.numel();
    Tensor flat = empty({n * size_}, TensorOptions(output.dtype(), output.device()));
    for (int r = 0; r < size_; ++r) flat.narrow(0, r * n, n).copy_(inputs[r].reshape({-1}));
    NcclReduction red(op, output.dtype(), c, "reduce_scatter");
    enqueued(c, ncclReduceScatter(flat.data_ptr(), output.data_ptr(), n, nccl_dtype(output.dtype(), "reduce_scatter"),
                                  red.op(), c, s),
             "ncclReduceScatter");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::alltoall_base(Tensor& output, const Tensor& input, const IntList& output_splits,
                                                      const IntList& input_splits) {
  auto splits = [&](const Tensor& t, const IntList& given, const char* which) {
    IntList s = given;
    if (s.empty()) {
      TR_CHECK(t.dim() > 0 && t.size(0) % size_ == 0, ValueError,
               "alltoall_base on group '{}': {} dim 0 ({}) does not split evenly over {} ranks; pass splits", name_,
               which, t.dim() > 0 ? t.size(0) : 0, size_);
      s.assign(size_, t.size(0) / size_);
    }
    int64_t total = 0;
    for (int64_t v : s) total += v;
    TR_CHECK(static_cast<int>(s.size()) == size_ && t.dim() > 0 && total == t.size(0), ValueError,
             "alltoall_base on group '{}': {} splits [{}] must have {} entries summing to dim 0 ({})", name_, which,
             fmt::join(s, ", "), size_, t.dim() > 0 ? t.size(0) : 0);
    return s;
  };
  const IntList in_s = splits(input, input_splits, "input"), out_s = splits(output, output_splits, "output");
  TR_CHECK(input.dtype() == output.dtype(), TypeError, "alltoall_base on group '{}': dtypes {} and {} differ", name_,
           dtype_name(input.dtype()), dtype_name(output.dtype()));
  return run("alltoall_base", {output, input}, [&](ncclComm* c, CUstream_st* s) {
    const int64_t row_in = input.size(0) ? input.numel() / input.size(0) : 0;
    const int64_t row_out = output.size(0) ? output.numel() / output.size(0) : 0;
    const int64_t es = input.element_size();
    const ncclDataType_t dt = nccl_dtype(input.dtype(), "alltoall");
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    int64_t in_off = 0, out_off = 0;
    for (int r = 0; r < size_; ++r) {
      if (in_s[r] > 0)
        check_nccl(ncclSend(static_cast<char*>(input.data_ptr()) + in_off * row_in * es, in_s[r] * row_in, dt, r, c, s),
                   "ncclSend", c);
      if (out_s[r] > 0)
        check_nccl(ncclRecv(static_cast<char*>(output.data_ptr()) + out_off * row_out * es, out_s[r] * row_out, dt, r,
                            c, s),
                   "ncclRecv", c);
      in_off += in_s[r];
      out_off += out_s[r];
    }
    enqueued(c, ncclGroupEnd(), "ncclGroupEnd");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs) {
  TR_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_, ValueError,
           "alltoall on group '{}': expected {} inputs and outputs, got {} and {}", name_, size_, inputs.size(),
           outputs.size());
  std::vector<Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  return run("alltoall", all, [&](ncclComm* c, CUstream_st* s) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      check_nccl(ncclSend(inputs[r].data_ptr(), inputs[r].numel(), nccl_dtype(inputs[r].dtype(), "alltoall"), r, c, s),
                 "ncclSend", c);
      check_nccl(ncclRecv(outputs[r].data_ptr(), outputs[r].numel(), nccl_dtype(outputs[r].dtype(), "alltoall"), r, c,
                          s),
                 "ncclRecv", c);
    }
    enqueued(c, ncclGroupEnd(), "ncclGroupEnd");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_rank(root, "gather", "root");
  if (rank_ == root)
    TR_CHECK(static_cast<int>(outputs.size()) == size_, ValueError,
             "gather on group '{}': root needs {} output tensors, got {}", name_, size_, outputs.size());
  std::vector<Tensor> all = rank_ == root ? outputs : std::vector<Tensor>{};
  all.push_back(input);
  return run("gather", all, [&](ncclComm* c, CUstream_st* s) {
    const ncclDataType_t dt = nccl_dtype(input.dtype(), "gather");
    if (rank_ == root) outputs[root].copy_(input);
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r)
        if (r != root) check_nccl(ncclRecv(outputs[r].data_ptr(), outputs[r].numel(), dt, r, c, s), "ncclRecv", c);
    } else {
      check_nccl(ncclSend(input.data_ptr(), input.numel(), dt, root, c, s), "ncclSend", c);
    }
    enqueued(c, ncclGroupEnd(), "ncclGroupEnd");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::scatter(Tensor& output, std::vector<Tensor>& inputs, int root) {
  check_rank(root, "scatter", "root");
  if (rank_ == root)
    TR_CHECK(static_cast<int>(inputs.size()) == size_, ValueError,
             "scatter on group '{}': root needs {} input tensors, got {}", name_, size_, inputs.size());
  std::vector<Tensor> all = rank_ == root ? inputs : std::vector<Tensor>{};
  all.push_back(output);
  return run("scatter", all, [&](ncclComm* c, CUstream_st* s) {
    const ncclDataType_t dt = nccl_dtype(output.dtype(), "scatter");
    if (rank_ == root) output.copy_(inputs[root]);
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r)
        if (r != root) check_nccl(ncclSend(inputs[r].data_ptr(), inputs[r].numel(), dt, r, c, s), "ncclSend", c);
    } else {
      check_nccl(ncclRecv(output.data_ptr(), output.numel(), dt, root, c, s), "ncclRecv", c);
    }
    enqueued(c, ncclGroupEnd(), "ncclGroupEnd");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::barrier() {
  // An allreduce of one element on the current device, waited on by the CPU.
  Tensor one = zeros({1}, TensorOptions(DType::Int32, Device(DeviceType::CUDA, cuda::current_device())));
  return run("barrier", {one}, [&](ncclComm* c, CUstream_st* s) {
    enqueued(c, ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclInt32, ncclSum, c, s), "ncclAllReduce");
  }, /*cpu_wait=*/true);
}

std::shared_ptr<Work> ProcessGroupNCCL::send(const Tensor& t, int dst, int /*tag*/) {
  check_rank(dst, "send", "destination");
  TR_CHECK(dst != rank_, ValueError, "send on group '{}': rank {} cannot send to itself", name_, rank_);
  return run("send", {t}, [&](ncclComm* c, CUstream_st* s) {
    enqueued(c, ncclSend(t.data_ptr(), t.numel(), nccl_dtype(t.dtype(), "send"), dst, c, s), "ncclSend");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::recv(Tensor& t, int src, int /*tag*/) {
  check_rank(src, "recv", "source");
  TR_CHECK(src != rank_, ValueError, "recv on group '{}': rank {} cannot receive from itself", name_, rank_);
  return run("recv", {t}, [&](ncclComm* c, CUstream_st* s) {
    enqueued(c, ncclRecv(t.data_ptr(), t.numel(), nccl_dtype(t.dtype(), "recv"), src, c, s), "ncclRecv");
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::recv_anysource(Tensor&, int) {
  throw NotImplementedError(fmt::format(
      "recv_anysource on group '{}': NCCL cannot receive from any source; name the sender, or use gloo", name_));
}

std::vector<std::shared_ptr<Work>> ProcessGroupNCCL::batch_isend_irecv(std::vector<P2POp>& ops) {
  TR_CHECK(!ops.empty(), ValueError, "batch_isend_irecv on group '{}': no operations", name_);
  std::vector<Tensor> all;
  for (const P2POp& p : ops) {
    check_rank(p.peer, "batch_isend_irecv", "peer");
    all.push_back(p.tensor);
  }
  auto work = run("batch_isend_irecv", all, [&](ncclComm* c, CUstream_st* s) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (P2POp& p : ops) {
      const ncclDataType_t dt = nccl_dtype(p.tensor.dtype(), "batch_isend_irecv");
      if (p.kind == P2POp::SEND)
        check_nccl(ncclSend(p.tensor.data_ptr(), p.tensor.numel(), dt, p.peer, c, s), "ncclSend", c);
      else
        check_nccl(ncclRecv(p.tensor.data_ptr(), p.tensor.numel(), dt, p.peer, c, s), "ncclRecv", c);
    }
    enqueued(c, ncclGroupEnd(), "ncclGroupEnd");
  });
  return std::vector<std::shared_ptr<Work>>(ops.size(), work);
}

namespace {

const bool registered = [] {
  register_backend("nccl", [](std::shared_ptr<Store> store, int rank, int size, const std::string& name,
                              Milliseconds timeout) -> std::shared_ptr<ProcessGroup> {
    ProcessGroupNCCL::Options o;
    o.timeout = timeout;
    return std::make_shared<ProcessGroupNCCL>(std::move(store), rank, size, name, o);
  });
  return true;
}();

}  // namespace
}  // namespace c10d
}  // namespace trainrun
