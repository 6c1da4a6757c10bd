// One rank of an NCCL scenario, run by nccl_test under the trainrun launcher
// with one GPU per rank (cuda:LOCAL_RANK). Prints what differed and exits 1
// on a failed check.
//   collectives: every collective against values computed on the CPU
//   ddp:         DDP gradients on CUDA equal one process on the whole batch
//   timeout:     the last rank skips an allreduce; the others' work fails
//                at the group timeout with the op and its number named
#include <chrono>
#include <cstdio>
#include <thread>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "c10d/ddp/distributed_data_parallel.h"
#include "c10d/distributed.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "tensor/cuda/runtime.h"
#include "tensor/cuda/stream.h"
#include "tests/c10d/worker_checks.h"
#include "tests/multirank/scenario.h"

namespace trainrun {
namespace c10d {
namespace {

using namespace std::chrono_literals;

Device my_device() { return Device(DeviceType::CUDA, static_cast<int16_t>(cuda::current_device())); }

// Rank r's tensor: r+1 at every element plus its index modulo 16 (distinct
// per rank). Small integers keep every sum of up to 8 ranks exact in bfloat16
// (integers to 256 are), so results compare exactly whatever order NCCL adds in.
Tensor rank_tensor(int r, int64_t n, DType dt) {
  Tensor index = remainder(arange(n, DType::Float64), scalar_tensor(16.0));
  return add(index, scalar_tensor(static_cast<double>(r + 1))).to(dt);
}

void collectives() {
  ProcessGroup& pg = *default_group();
  const Device dev = my_device();
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Int64}) {
    const int64_t n = 1000;
    Tensor want = zeros({n}, DType::Float64);
    for (int r = 0; r < g_world; ++r) want = add(want, rank_tensor(r, n, DType::Float64));
    Tensor t = rank_tensor(g_rank, n, dt).to(dev);
    pg.allreduce(t)->wait();
    expect_equal(t.cpu(), want.to(dt), fmt::format("allreduce SUM {}", dtype_name(dt)));
  }
  Tensor mx = rank_tensor(g_rank, 8, DType::Float32).to(dev);
  pg.allreduce(mx, ReduceOp::MAX)->wait();
  expect_equal(mx.cpu(), rank_tensor(g_world - 1, 8, DType::Float32), "allreduce MAX");
  Tensor avg = full({4}, static_cast<double>(g_rank), TensorOptions(DType::Float32, dev));
  pg.allreduce(avg, ReduceOp::AVG)->wait();
  expect_equal(avg.cpu(), full({4}, (g_world - 1) / 2.0, DType::Float32), "allreduce AVG");
  Tensor pre = ones({4}, TensorOptions(DType::Float32, dev));
  pg.allreduce(pre, ReduceOp::premul_sum(0.5))->wait();
  expect_equal(pre.cpu(), full({4}, 0.5 * g_world, DType::Float32), "allreduce PREMUL_SUM");

  Tensor b = g_rank == 1 ? full({6}, 7.0, TensorOptions(DType::Float32, dev)) : zeros({6}, TensorOptions(DType::Float32, dev));
  pg.broadcast(b, 1)->wait();
  expect_equal(b.cpu(), full({6}, 7.0, DType::Float32), "broadcast from 1");

  Tensor in = rank_tensor(g_rank, 5, DType::Float32).to(dev);
  Tensor gathered = empty({g_world * 5}, TensorOptions(DType::Float32, dev));
  pg.all_gather_into_tensor(gathered, in)->wait();
  std::vector<Tensor> parts;
  for (int r = 0; r < g_world; ++r) parts.push_back(rank_tensor(r, 5, DType::Float32));
  expect_equal(gathered.cpu(), cat(parts, 0), "all_gather_into_tensor");
  std::vector<Tensor> outs;
  for (int r = 0; r < g_world; ++r) outs.push_back(empty({5}, TensorOptions(DType::Float32, dev)));
  pg.allgather(outs, in)->wait();
  for (int r = 0; r < g_world; ++r) expect_equal(outs[r].cpu(), parts[r], fmt::format("allgather part {}", r));

  Tensor big = rank_tensor(g_rank, 3 * g_world, DType::Float32).to(dev);
  Tensor mine = empty({3}, TensorOptions(DType::Float32, dev));
  pg.reduce_scatter_tensor(mine, big)->wait();
  Tensor sum_all = zeros({3 * g_world}, DType::Float32);
  for (int r = 0; r < g_world; ++r) sum_all = add(sum_all, rank_tensor(r, 3 * g_world, DType::Float32));
  expect_equal(mine.cpu(), sum_all.narrow(0, 3 * g_rank, 3).contiguous(), "reduce_scatter_tensor");

  // Point to point in a ring, batched so that no order deadlocks.
  Tensor to_next = full({16}, static_cast<double>(g_rank), TensorOptions(DType::Float32, dev));
  Tensor from_prev = empty({16}, TensorOptions(DType::Float32, dev));
  std::vector<P2POp> ops = {{P2POp::SEND, to_next, (g_rank + 1) % g_world},
                            {P2POp::RECV, from_prev, (g_rank + g_world - 1) % g_world}};
  wait_all(pg.batch_isend_irecv(ops));
  expect_equal(from_prev.cpu(), full({16}, static_cast<double>((g_rank + g_world - 1) % g_world), DType::Float32),
               "ring send/recv");

  // Work.wait() orders the caller's stream after the collective: work queued
  // on a side stream right after it sees the reduced values.
  cuda::Stream side = cuda::stream_from_pool();
  Tensor w = ones({1 << 20}, TensorOptions(DType::Float32, dev));
  auto work = pg.allreduce(w);
  {
    cuda::StreamGuard guard(side);
    work->wait();
    Tensor doubled = mul(w, scalar_tensor(2.0));
    expect_equal(doubled.narrow(0, 0, 4).cpu(), full({4}, 2.0 * g_world, DType::Float32), "wait orders the stream");
  }
  pg.barrier()->wait();
}

void ddp() {
  ProcessGroup& pg = *default_group();
  const Device dev = my_device();
  manual_seed(3);
  auto model = std::make_shared<nn::Linear>(8, 4);
  model->to(dev);
  DistributedDataParallel ddp_model(model, default_group());
  Generator g(11);
  Tensor x_all = randn({4 * g_world, 8}, DType::Float32, &g);
  Tensor y_all = randn({4 * g_world, 4}, DType::Float32, &g);
  Tensor x = x_all.narrow(0, 4 * g_rank, 4).to(dev), y = y_all.narrow(0, 4 * g_rank, 4).to(dev);
  backward(nn::mse_loss(ddp_model.forward(x), y));
  // One process on the whole batch, on the CPU.
  manual_seed(3);
  auto reference = std::make_shared<nn::Linear>(8, 4);
  backward(nn::mse_loss(reference->forward(x_all), y_all));
  auto mine = model->named_parameters(), ref = reference->named_parameters();
  for (size_t i = 0; i < mine.size(); ++i) {
    expect(grad(mine[i].second).is_cuda(), "gradients stay on the GPU");
    expect_equal(grad(mine[i].second).cpu(), grad(ref[i].second), "DDP gradient of " + mine[i].first);
  }
  pg.barrier()->wait();
}

void timeout() {
  ProcessGroup& pg = *default_group();
  Tensor t = ones({4}, TensorOptions(DType::Float32, my_device()));
  pg.allreduce(t)->wait();
  cuda::synchronize();
  if (g_rank == g_world - 1) {
    // Skips the second allreduce and waits for the others to fail.
    std::this_thread::sleep_for(8s);
    std::_Exit(0);
  }
  auto work = pg.allreduce(t);
  try {
    work->wait();          // returns at once (stream semantics)...
    cuda::synchronize();   // ...the GPU finishes when the watchdog aborts
    while (!work->is_completed()) std::this_thread::sleep_for(10ms);
    std::rethrow_exception(work->exception());
  } catch (const DistBackendError& e) {
    const std::string msg = e.what();
    expect(msg.find("allreduce #2") != std::string::npos, "the error names the op and its number: " + msg);
    expect(msg.find("timeout") != std::string::npos, "the error says it timed out: " + msg);
    std::fprintf(stderr, "rank %d: got the expected error: %s\n", g_rank, msg.c_str());
    std::_Exit(0);
  }
  fail("the skipped allreduce did not fail");
}

// One GPU per rank (cuda:LOCAL_RANK), then the default group over NCCL.
JoinedGroup join_on_my_gpu(std::chrono::milliseconds timeout) {
  const char* local = std::getenv("LOCAL_RANK");
  cuda::set_device(local != nullptr ? std::atoi(local) : 0);
  return JoinedGroup(timeout, "nccl");
}

TR_RANK_SCENARIO(collectives) {
  JoinedGroup g = join_on_my_gpu(60s);
  collectives();
}
TR_RANK_SCENARIO(ddp) {
  JoinedGroup g = join_on_my_gpu(60s);
  ddp();
}
TR_RANK_SCENARIO(timeout) {
  JoinedGroup g = join_on_my_gpu(3s);
  timeout();
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun

int main(int argc, char** argv) { return trainrun::multirank::run_scenario_main(argc, argv); }
