#include "c10d/gloo/process_group_gloo.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "c10d/distributed.h"
#include "c10d/gloo/gloo_store.h"
#include "c10d/gloo/tcp_device.h"
#include "c10d/gloo/tensor_buffers.h"
#include "tensor/dispatcher.h"
#include "tensor/dtype_visit.h"
#include "tensor/ops.h"

namespace trainrun {
namespace c10d {
namespace {

// Allreduce over TCP: bcube up to this size, the ring above (see the constructor).
constexpr int64_t kBcubeMaxBytes = 256 << 10;

// Slot prefix of our ring reduce-scatter (Gloo's collectives use 0x01-0x08,
// point-to-point messages 0x40).
constexpr uint8_t kRingSlotPrefix = 0x41;

}  // namespace

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size, std::string name, Options options)
    : ProcessGroup(rank, size, std::move(name), options.timeout), store_(std::move(store)) {
  TR_CHECK(size >= 1 && rank >= 0 && rank < size, ValueError,
           "ProcessGroupGloo '{}': rank {} is not in [0, {}) (world size {})", name_, rank, size, size);
  try {
    device_ = make_device(options.hostname);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout_);
    GlooStore gloo_store(store_);
    context->connectFullMesh(gloo_store, device_);
    context_ = context;
    if (size > 1 && options.shared_memory && ShmCommunicator::usable(*store_, rank, size))
      shm_ = std::make_unique<ShmCommunicator>(*store_, rank, size, timeout_);
  } catch (const trainrun::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DistBackendError(fmt::format("ProcessGroupGloo '{}': rank {} of {} could not connect to its peers: {}", name_,
                                       rank, size, e.what()));
  }
  // Over TCP, bcube (log n steps) for small buffers and the ring (optimal
  // bytes per link) for large ones: measured with bench/collectives.py --tcp
  // --allreduce ring|bcube (4 ranks, loopback: bcube 1.3 ms vs ring 5-6 ms at
  // 4 KiB, 2.7 vs 3.5-4.7 ms at 256 KiB, even from 1 MiB up).
  // TRAINRUN_GLOO_ALLREDUCE=ring|bcube forces one.
  if (const char* algo = std::getenv("TRAINRUN_GLOO_ALLREDUCE"); algo != nullptr) {
    const std::string a = algo;
    TR_CHECK(a == "ring" || a == "bcube" || a == "auto", ValueError,
             "TRAINRUN_GLOO_ALLREDUCE must be ring, bcube or auto, got '{}'", a);
    if (a != "auto") forced_allreduce_algorithm_ = a == "ring" ? 1 : 2;
  }
  worker_ = std::thread([this] { worker_loop(); });
  p2p_threads_[0] = std::thread([this] { p2p_loop(false); });
  p2p_threads_[1] = std::thread([this] { p2p_loop(true); });
}

ProcessGroupGloo::~ProcessGroupGloo() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  abort_pending_p2p();
  if (worker_.joinable()) worker_.join();
  for (std::thread& t : p2p_threads_)
    if (t.joinable()) t.join();
}

std::shared_ptr<Work> ProcessGroupGloo::enqueue(const char* op, std::function<void(uint32_t)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  TR_CHECK(!stopping_, DistBackendError, "{} on group '{}': the group is being destroyed", op, name_);
  const uint32_t seq = ++next_seq_;
  auto work = std::make_shared<Work>(fmt::format("{} #{} on group '{}' (rank {} of {})", op, seq, name_, rank_, size_));
  queue_.push_back(Item{work, std::move(fn), seq});
  cv_.notify_one();
  return work;
}

void ProcessGroupGloo::worker_loop() {
  // Copies made here (non-contiguous tensors) must not build autograd graphs.
  ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      if (stopping_) {
        // Destroyed with work pending: fail it rather than leave waiters blocked.
        for (Item& left : queue_)
          left.work->finish(std::make_exception_ptr(
              DistBackendError(left.work->description() + ": the group was destroyed before it ran")));
        queue_.clear();
        return;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    item.work->mark_started();
    try {
      item.fn(item.tag);
      // The collective's tensors (captured by fn) are let go before waiters wake: memory
      // is back when wait() returns.
      item.fn = nullptr;
      item.work->finish();
    } catch (const gloo::IoException& e) {
      item.work->finish(failure(item, e.what()));
    } catch (const DistBackendError& e) {
      item.work->finish(failure(item, e.what()));
    } catch (const trainrun::Error&) {
      item.work->finish(std::current_exception());  // bad input: its own type and message
    } catch (const std::exception& e) {
      item.work->finish(
          std::make_exception_ptr(DistBackendError(fmt::format("{}: {}", item.work->description(), e.what()))));
    }
  }
}

std::exception_ptr ProcessGroupGloo::failure(const Item& item, const std::string& what) {
  // The wrapper every group gets (process_group_wrapper.h) adds which ranks
  // had not entered this collective.
  return std::make_exception_ptr(DistBackendError(
      fmt::format("{}: {} (a rank exited, or did not reach this collective within the group timeout of {} ms)",
                  item.work->description(), what, timeout_.count())));
}

void ProcessGroupGloo::reduce_in_place(Tensor& buffer, ReduceOp op, uint32_t tag, int root) {
  if (buffer.numel() == 0) return;
  if (op.kind == ReduceOp::PREMUL_SUM) mul_(buffer, op.factor);
  ReduceFn fn = reduce_function(op, buffer.dtype());
  visit_dtype(buffer.dtype(), "allreduce", [&](auto t) {
    using T = decltype(t);
    T* data = static_cast<T*>(buffer.data_ptr());
    const size_t n = static_cast<size_t>(buffer.numel());
    if (root < 0 && shm_) {
      shm_->allreduce(data, n, sizeof(T), fn);
    } else if (root < 0) {
      gloo::AllreduceOptions o(context_);
      o.setOutput<T>(data, n);
      o.setReduceFunction(fn);
      o.setTag(tag);
      o.setTimeout(timeout_);
      const int algorithm = forced_allreduce_algorithm_ != 0    ? forced_allreduce_algorithm_
                            : buffer.nbytes() <= kBcubeMaxBytes ? 2
                                                                : 1;
      o.setAlgorithm(algorithm == 2 ? gloo::AllreduceOptions::Algorithm::BCUBE
                                    : gloo::AllreduceOptions::Algorithm::RING);
      gloo::allreduce(o);
    } else {
      gloo::ReduceOptions o(context_);
      o.setInput<T>(data, n);
      o.setOutput<T>(data, n);
      o.setRoot(root);
      o.setReduceFunction(fn);
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::reduce(o);
    }
  });
  if (op.kind == ReduceOp::AVG && (root < 0 || root == rank_)) finish_average(buffer, size_);
}

std::shared_ptr<Work> ProcessGroupGloo::allreduce(Tensor& tensor, ReduceOp op) {
  check_cpu(tensor, "allreduce", name_, "tensor");
  reduce_function(op, tensor.dtype());  // refuses op/dtype mismatches now, on the caller's thread
  return enqueue(
      "allreduce",
      [this, tensor, op](uint32_t tag) {
        Tensor buffer = contiguous_buffer(tensor);
        reduce_in_place(buffer, op, tag, -1);
        copy_back(tensor, buffer);
      });
}

std::shared_ptr<Work> ProcessGroupGloo::allreduce_coalesced(std::vector<Tensor>& tensors, ReduceOp op) {
  TR_CHECK(!tensors.empty(), ValueError, "allreduce_coalesced on group '{}': no tensors given", name_);
  for (const Tensor& t : tensors) {
    check_cpu(t, "allreduce_coalesced", name_, "a tensor");
    TR_CHECK(t.dtype() == tensors[0].dtype(), ValueError,
             "allreduce_coalesced on group '{}': tensors must share one dtype, got {} and {}", name_,
             dtype_name(tensors[0].dtype()), dtype_name(t.dtype()));
  }
  reduce_function(op, tensors[0].dtype());
  return enqueue(
      "allreduce_coalesced",
      [this, tensors, op](uint32_t tag) {
        std::vector<Tensor> flat;
        for (const Tensor& t : tensors) flat.push_back(reshape(contiguous_buffer(t), {-1}));
        Tensor buffer = cat(flat, 0);
        reduce_in_place(buffer, op, tag, -1);
        int64_t offset = 0;
        for (const Tensor& t : tensors) {
          copy_back(t, reshape(narrow(buffer, 0, offset, t.numel()), t.sizes()));
          offset += t.numel();
        }
      });
}

std::shared_ptr<Work> ProcessGroupGloo::broadcast(Tensor& tensor, int root) {
  check_cpu(tensor, "broadcast", name_, "tensor");
  check_rank(root, "broadcast", "root");
  return enqueue(
      "broadcast",
      [this, tensor, root](uint32_t tag) {
        if (tensor.numel() == 0) return;
        Tensor buffer = contiguous_buffer(tensor);
        if (shm_) {
          shm_->broadcast(bytes_of(buffer), static_cast<size_t>(buffer.nbytes()), root);
        } else {
          gloo::BroadcastOptions o(context_);
          o.setOutput<char>(bytes_of(buffer), static_cast<size_t>(buffer.nbytes()));
          o.setRoot(root);
          o.setTag(tag);
          o.setTimeout(timeout_);
          gloo::broadcast(o);
        }
        copy_back(tensor, buffer);
      });
}

std::shared_ptr<Work> ProcessGroupGloo::reduce(Tensor& tensor, int root, ReduceOp op) {
  check_cpu(tensor, "reduce", name_, "tensor");
  check_rank(root, "reduce", "root");
  reduce_function(op, tensor.dtype());
  return enqueue(
      "reduce",
      [this, tensor, root, op](uint32_t tag) {
        // A copy: the reduction scribbles partial results into non-root buffers.
        Tensor buffer = clone(tensor);
        reduce_in_place(buffer, op, tag, root);
        if (rank_ == root) copy_back(tensor, buffer);
      });
}

void ProcessGroupGloo::gather_bytes(const Tensor& in, const Tensor& out, uint32_t tag) {
  if (shm_) {
    shm_->allgather(bytes_of(in), bytes_of(out), static_cast<size_t>(in.nbytes()));
    return;
  }
  gloo::AllgatherOptions o(context_);
  o.setInput<char>(bytes_of(in), static_cast<size_t>(in.nbytes()));
  o.setOutput<char>(bytes_of(out), static_cast<size_t>(out.nbytes()));
  o.setTag(tag);
  o.setTimeout(timeout_);
  gloo::allgather(o);
}

std::shared_ptr<Work> ProcessGroupGloo::allgather(std::vector<Tensor>& outputs, const Tensor& input) {
  check_cpu(input, "allgather", name_, "input");
  TR_CHECK(static_cast<int>(outputs.size()) == size_, ValueError,
           "allgather on group '{}': expected {} output tensors (one per rank), got {}", name_, size_, outputs.size());
  for (const Tensor& o : outputs) check_like(o, input, "allgather", name_, "an output");
  return enqueue(
      "allgather",
      [this, outputs, input](uint32_t tag) {
        Tensor in = contiguous_buffer(input);
        IntList shape = input.sizes();
        shape.insert(shape.begin(), size_);
        Tensor flat = empty(shape, input.dtype());
        if (input.numel() > 0) gather_bytes(in, flat, tag);
        for (int r = 0; r < size_; ++r) copy_back(outputs[r], select(flat, 0, r));
      });
}

std::shared_ptr<Work> ProcessGroupGloo::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  check_cpu(input, "all_gather_into_tensor", name_, "input");
  check_cpu(output, "all_gather_into_tensor", name_, "output");
  TR_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() * size_, ValueError,
           "all_gather_into_tensor on group '{}': output is {} {} but must hold {} inputs of {} {}", name_,
           dtype_name(output.dtype()), output.shape_str(), size_, dtype_name(input.dtype()), input.shape_str());
  return enqueue(
      "all_gather_into_tensor",
      [this, output, input](uint32_t tag) {
        if (input.numel() == 0) return;
        Tensor in = contiguous_buffer(input), out = contiguous_buffer(output);
        gather_bytes(in, out, tag);
        copy_back(output, out);
      });
}

std::shared_ptr<Work> ProcessGroupGloo::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) {
  check_cpu(input, "reduce_scatter_tensor", name_, "input");
  check_cpu(output, "reduce_scatter_tensor", name_, "output");
  TR_CHECK(output.dtype() == input.dtype() && input.numel() == output.numel() * size_, ValueError,
           "reduce_scatter_tensor on group '{}': input is {} {} but must hold {} outputs of {} {}", name_,
           dtype_name(input.dtype()), input.shape_str(), size_, dtype_name(output.dtype()), output.shape_str());
  reduce_function(op, input.dtype());
  return enqueue(
      "reduce_scatter_tensor",
      [this, output, input, op](uint32_t tag) {
        if (output.numel() == 0) return;
        if (shm_) {
          // Each rank reduces only its own chunk, straight from the others' inputs.
          Tensor in = contiguous_buffer(input), out = contiguous_buffer(output);
          if (op.kind == ReduceOp::PREMUL_SUM) in = mul(in, op.factor);
          shm_->reduce_scatter(bytes_of(in), bytes_of(out), static_cast<size_t>(out.numel()), out.element_size(),
                               reduce_function(op, out.dtype()));
          if (op.kind == ReduceOp::AVG) finish_average(out, size_);
          copy_back(output, out);
          return;
        }
        // Over TCP: a ring on unbound buffers (Gloo's newer API has no
        // reduce-scatter, and its older class would slow the context).
        Tensor work = reshape(clone(input), {-1});
        if (op.kind == ReduceOp::PREMUL_SUM) mul_(work, op.factor);
        ring_reduce_scatter(work, output.numel(), reduce_function(op, work.dtype()), tag);
        Tensor mine = reshape(narrow(work, 0, output.numel() * rank_, output.numel()), output.sizes());
        if (op.kind == ReduceOp::AVG) finish_average(mine, size_);
        copy_back(output, mine);
      });
}

// Ring reduce-scatter: at step s rank r sends its partial sum of chunk
// (r - s - 1) mod n to rank r + 1, and adds the partial sum of chunk
// (r - s - 2) mod n that rank r - 1 sends; after n - 1 steps chunk r holds
// every rank's contribution. Each rank sends (n - 1) / n of the buffer, half
// of what an allreduce moves.
void ProcessGroupGloo::ring_reduce_scatter(Tensor& work, int64_t chunk_numel, const ReduceFn& fn, uint32_t tag) {
  if (size_ == 1 || chunk_numel == 0) return;
  const size_t elem = static_cast<size_t>(work.element_size());
  const size_t chunk_bytes = static_cast<size_t>(chunk_numel) * elem;
  Tensor incoming = empty({chunk_numel}, work.dtype());
  auto send_buf = context_->createUnboundBuffer(bytes_of(work), static_cast<size_t>(work.nbytes()));
  auto recv_buf = context_->createUnboundBuffer(bytes_of(incoming), chunk_bytes);
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    const int send_chunk = ((rank_ - step - 1) % size_ + size_) % size_;
    const int recv_chunk = ((rank_ - step - 2) % size_ + size_) % size_;
    const uint64_t slot = gloo::Slot::build(kRingSlotPrefix, tag) + static_cast<uint8_t>(step % 256);
    recv_buf->recv(prev, slot, 0, chunk_bytes);
    send_buf->send(next, slot, static_cast<size_t>(send_chunk) * chunk_bytes, chunk_bytes);
    recv_buf->waitRecv(timeout_);
    char* acc = bytes_of(work) + static_cast<size_t>(recv_chunk) * chunk_bytes;
    fn(acc, acc, bytes_of(incoming), static_cast<size_t>(chunk_numel));
    send_buf->waitSend(timeout_);
  }
}

std::shared_ptr<Work> ProcessGroupGloo::reduce_scatter(Tensor& output, std::vector<Tensor>& inputs, ReduceOp op) {
  TR_CHECK(static_cast<int>(inputs.size()) == size_, ValueError,
           "reduce_scatter on group '{}': expected {} input tensors (one per rank), got {}", name_, size_,
           inputs.size());
  for (const Tensor& t : inputs) check_like(t, output, "reduce_scatter", name_, "an input");
  std::vector<Tensor> flat;
  for (const Tensor& t : inputs) flat.push_back(reshape(t, {-1}));
  Tensor stacked = cat(flat, 0);
  return reduce_scatter_tensor(output, stacked, op);
}

std::shared_ptr<Work> ProcessGroupGloo::alltoall_base(Tensor& output, const Tensor& input, const IntList& output_splits,
                                                      const IntList& input_splits) {
  check_cpu(input, "alltoall_base", name_, "input");
  check_cpu(output, "alltoall_base", name_, "output");
  TR_CHECK(output.dtype() == input.dtype(), ValueError,
           "alltoall_base on group '{}': output dtype {} != input dtype {}", name_, dtype_name(output.dtype()),
           dtype_name(input.dtype()));
  auto counts = [&](const Tensor& t, const IntList& splits, const char* what) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row_bytes = rows == 0 ? 0 : t.nbytes() / rows;
    std::vector<int64_t> c;
    if (splits.empty()) {
      TR_CHECK(rows % size_ == 0, ValueError,
               "alltoall_base on group '{}': {} has {} rows, not divisible into {} equal chunks (give split sizes)",
               name_, what, rows, size_);
      c.assign(size_, rows / size_ * row_bytes);
    } else {
      TR_CHECK(static_cast<int>(splits.size()) == size_, ValueError,
               "alltoall_base on group '{}': {} split sizes has {} entries, expected {}", name_, what, splits.size(),
               size_);
      int64_t total = 0;
      for (int64_t s : splits) {
        TR_CHECK(s >= 0, ValueError, "alltoall_base on group '{}': negative {} split size {}", name_, what, s);
        total += s;
        c.push_back(s * row_bytes);
      }
      TR_CHECK(total == rows, ValueError, "alltoall_base on group '{}': {} split sizes sum to {} but it has {} rows",
               name_, what, total, rows);
    }
    return c;
  };
  std::vector<int64_t> in_counts = counts(input, input_splits, "input"),
                       out_counts = counts(output, output_splits, "output");
  return enqueue(
      "alltoall_base",
      [this, output, input, in_counts, out_counts](uint32_t tag) {
        if (shm_ && input.dim() > 0) {
          // Through shared memory, each destination's rows copied straight from the (possibly strided)
          // input into the segment: no contiguous copy first (DTensor's Shard(i) -> Shard(j) passes a view).
          Tensor out = contiguous_buffer(output);
          const size_t elem = static_cast<size_t>(input.element_size());
          const int64_t row_bytes = input.size(0) == 0 ? 0 : input.nbytes() / input.size(0);
          std::vector<size_t> send(size_), recv(size_), recv_at(size_);
          std::vector<Tensor> pieces(size_);
          int64_t row = 0;
          size_t at = 0;
          for (int r = 0; r < size_; ++r) {
            const int64_t rows = row_bytes == 0 ? 0 : in_counts[r] / row_bytes;
            pieces[r] = input.narrow(0, row, rows);
            row += rows;
            send[r] = static_cast<size_t>(in_counts[r]);
            recv[r] = static_cast<size_t>(out_counts[r]);
            recv_at[r] = at;
            at += recv[r];
          }
          shm_->alltoall(send, recv, recv_at, elem,
                         [&](int dst, size_t first, size_t n, char* to) {
                           copy_elements(pieces[dst], static_cast<int64_t>(first / elem),
                                         static_cast<int64_t>((first + n) / elem), to);
                         },
                         static_cast<char*>(bytes_of(out)));
          copy_back(output, out);
          return;
        }
        Tensor in = contiguous_buffer(input), out = contiguous_buffer(output);
        gloo::AlltoallvOptions o(context_);
        o.setInput<char>(bytes_of(in), in_counts);
        o.setOutput<char>(bytes_of(out), out_counts);
        o.setTag(tag);
        o.setTimeout(timeout_);
        gloo::alltoallv(o);
        copy_back(output, out);
      });
}

std::shared_ptr<Work> ProcessGroupGloo::alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs) {
  TR_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_, ValueError,
           "alltoall on group '{}': expected {} inputs and outputs, got {} and {}", name_, size_, inputs.size(),
           outputs.size());
  std::vector<int64_t> in_counts, out_counts;
  std::vector<Tensor> flat_in;
  for (int r = 0; r < size_; ++r) {
    check_cpu(inputs[r], "alltoall", name_, "an input");
    check_cpu(outputs[r], "alltoall", name_, "an output");
    TR_CHECK(inputs[r].dtype() == inputs[0].dtype() && outputs[r].dtype() == inputs[0].dtype(), ValueError,
             "alltoall on group '{}': every input and output must be {}", name_, dtype_name(inputs[0].dtype()));
    in_counts.push_back(inputs[r].nbytes());
    out_counts.push_back(outputs[r].nbytes());
    flat_in.push_back(reshape(inputs[r], {-1}));
  }
  return enqueue(
      "alltoall",
      [this, outputs, flat_in, in_counts, out_counts](uint32_t tag) {
        Tensor in = cat(flat_in, 0);
        int64_t out_numel = 0;
        for (const Tensor& t : outputs) out_numel += t.numel();
        Tensor out = empty({out_numel}, in.dtype());
        gloo::AlltoallvOptions o(context_);
        o.setInput<char>(bytes_of(in), in_counts);
        o.setOutput<char>(bytes_of(out), out_counts);
        o.setTag(tag);
        o.setTimeout(timeout_);
        gloo::alltoallv(o);
        int64_t offset = 0;
        for (const Tensor& t : outputs) {
          copy_back(t, reshape(narrow(out, 0, offset, t.numel()), t.sizes()));
          offset += t.numel();
        }
      });
}

// gather's outputs and scatter's inputs: size() tensors like `like` on the
// root, none elsewhere.
void ProcessGroupGloo::check_root_list(const std::vector<Tensor>& list, const Tensor& like, int root, const char* op,
                                       const char* what) const {
  if (rank_ == root) {
    TR_CHECK(static_cast<int>(list.size()) == size_, ValueError,
             "{} on group '{}': the root needs {} {} tensors, got {}", op, name_, size_, what, list.size());
    for (const Tensor& t : list) check_like(t, like, op, name_, what);
  } else {
    TR_CHECK(list.empty(), ValueError, "{} on group '{}': only the root (rank {}) takes {}s", op, name_, root, what);
  }
}

std::shared_ptr<Work> ProcessGroupGloo::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_cpu(input, "gather", name_, "input");
  check_rank(root, "gather", "root");
  check_root_list(outputs, input, root, "gather", "output");
  return enqueue(
      "gather",
      [this, outputs, input, root](uint32_t tag) {
        Tensor in = contiguous_buffer(input);
        IntList shape = input.sizes();
        shape.insert(shape.begin(), size_);
        Tensor flat = rank_ == root ? empty(shape, input.dtype()) : Tensor();
        gloo::GatherOptions o(context_);
        o.setInput<char>(bytes_of(in), static_cast<size_t>(in.nbytes()));
        if (rank_ == root) o.setOutput<char>(bytes_of(flat), static_cast<size_t>(flat.nbytes()));
        o.setRoot(root);
        o.setTag(tag);
        o.setTimeout(timeout_);
        gloo::gather(o);
        if (rank_ == root)
          for (int r = 0; r < size_; ++r) copy_back(outputs[r], select(flat, 0, r));
      });
}

std::shared_ptr<Work> ProcessGroupGloo::scatter(Tensor& output, std::vector<Tensor>& inputs, int root) {
  check_cpu(output, "scatter", name_, "output");
  check_rank(root, "scatter", "root");
  check_root_list(inputs, output, root, "scatter", "input");
  return enqueue(
      "scatter",
      [this, output, inputs, root](uint32_t tag) {
        Tensor out = contiguous_buffer(output);
        std::vector<Tensor> ins;
        std::vector<char*> ptrs;
        for (const Tensor& t : inputs) {
          ins.push_back(contiguous_buffer(t));
          ptrs.push_back(bytes_of(ins.back()));
        }
        gloo::ScatterOptions o(context_);
        if (rank_ == root) o.setInputs<char>(ptrs, static_cast<size_t>(out.nbytes()));
        o.setOutput<char>(bytes_of(out), static_cast<size_t>(out.nbytes()));
        o.setRoot(root);
        o.setTag(tag);
        o.setTimeout(timeout_);
        gloo::scatter(o);
        copy_back(output, out);
      });
}

std::shared_ptr<Work> ProcessGroupGloo::barrier() {
  return enqueue(
      "barrier",
      [this](uint32_t tag) {
        gloo::BarrierOptions o(context_);
        o.setTag(tag);
        o.setTimeout(timeout_);
        gloo::barrier(o);
      });
}

namespace {

// init_process_group("gloo") and new_group find the backend here.
const bool registered = [] {
  register_backend("gloo", [](std::shared_ptr<Store> store, int rank, int size, const std::string& name,
                              Milliseconds timeout) -> std::shared_ptr<ProcessGroup> {
    ProcessGroupGloo::Options o;
    o.timeout = timeout;
    return std::make_shared<ProcessGroupGloo>(std::move(store), rank, size, name, o);
  });
  return true;
}();

}  // namespace
}  // namespace c10d
}  // namespace trainrun
