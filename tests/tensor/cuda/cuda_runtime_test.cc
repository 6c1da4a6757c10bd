// On a GPU: streams and events order work and time it, the caching allocator
// reuses memory and keeps its statistics, pinned copies run asynchronously,
// out-of-memory names the numbers, and autograd and an optimizer step run on
// CUDA tensors with the CPU's results. Skipped without a GPU.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim/adam.h"
#include "tensor/cuda/cuda_allocator.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/pinned_memory.h"
#include "tests/expect_error.h"
#include "tests/tensor/cuda/gpu_test_util.h"

namespace trainrun::cuda {
namespace {

class CudaRuntime : public GpuTest {};

TEST_F(CudaRuntime, StreamGuardSetsAndRestoresTheCurrentStream) {
  const Stream before = current_stream(0);
  EXPECT_EQ(before, default_stream(0));
  Stream side = stream_from_pool(0);
  EXPECT_NE(side, before);
  {
    StreamGuard guard(side);
    EXPECT_EQ(current_stream(0), side);
  }
  EXPECT_EQ(current_stream(0), before);
}

TEST_F(CudaRuntime, EventsOrderStreamsAndTimeWork) {
  Stream producer = stream_from_pool(0), consumer = stream_from_pool(0);
  Tensor x = zeros({1 << 22}, TensorOptions(DType::Float32, kCuda));  // filled on the default stream
  Event filled;
  filled.record();  // pool streams do not wait for the default stream by themselves
  Event start(true), done(true);
  Tensor y;
  {
    StreamGuard g(producer);
    filled.block(producer);
    record_stream(x, producer);
    start.record();
    for (int i = 0; i < 20; ++i) add_(x, ones_like(x));
    done.record();
  }
  {
    StreamGuard g(consumer);
    done.block(consumer);  // the consumer's work sees all 20 additions
    y = mul(x, scalar_tensor(2.0));
  }
  consumer.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_GT(start.elapsed_time(done), 0.0f);
  EXPECT_EQ(y.narrow(0, 0, 1).item<float>(), 40.0f);
  EXPECT_EQ(y.narrow(0, (1 << 22) - 1, 1).item<float>(), 40.0f);
}

TEST_F(CudaRuntime, CachingAllocatorReusesMemoryAndCounts) {
  synchronize();
  empty_cache();
  reset_peak_memory_stats(0);
  const MemoryStats before = memory_stats(0);
  void* first = nullptr;
  {
    Tensor a = empty({1 << 20}, TensorOptions(DType::Float32, kCuda));  // 4 MiB
    first = a.data_ptr();
    const MemoryStats s = memory_stats(0);
    EXPECT_EQ(s.allocated_bytes - before.allocated_bytes, size_t(4) << 20);
    EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
  }
  const int64_t mallocs = memory_stats(0).num_device_allocs;
  Tensor b = empty({1 << 20}, TensorOptions(DType::Float32, kCuda));
  EXPECT_EQ(b.data_ptr(), first) << "a freed block of the same size comes back";
  EXPECT_EQ(memory_stats(0).num_device_allocs, mallocs) << "no new cudaMalloc";
  EXPECT_GE(memory_stats(0).peak_allocated_bytes, size_t(4) << 20);
  b = Tensor();
  empty_cache();
  EXPECT_EQ(memory_stats(0).reserved_bytes, before.reserved_bytes);
}

TEST_F(CudaRuntime, OutOfMemoryNamesTheRequestAndTheStatistics) {
  const size_t too_much = total_memory(0) * 2;
  expect_error<OutOfMemoryError>(
      [&] { empty({static_cast<int64_t>(too_much / 4)}, TensorOptions(DType::Float32, kCuda)); },
      {"CUDA out of memory on cuda:0", "tried to allocate", "in total", "reserved", "cudaMalloc calls"});
  EXPECT_GE(memory_stats(0).num_ooms, 1);
  Tensor still_works = ones({16}, TensorOptions(DType::Float32, kCuda));
  EXPECT_EQ(sum(still_works).item<float>(), 16.0f);
}

TEST_F(CudaRuntime, PinnedCopiesAreAsynchronousAndCorrect) {
  Tensor host = pin_memory(arange(1 << 20, DType::Float32));
  EXPECT_TRUE(is_pinned(host));
  EXPECT_FALSE(is_pinned(arange(4, DType::Float32)));
  Tensor dev = host.to(kCuda, /*non_blocking=*/true);
  Tensor back = pin_memory(zeros({1 << 20}, DType::Float32));
  back.copy_(dev);  // blocking copy_: the data is there when it returns
  expect_same(back, host, 0, 0, "round trip through pinned memory");
  Tensor async_back = pin_memory(zeros({1 << 20}, DType::Float32));
  copy_(async_back, dev, /*non_blocking=*/true);
  current_stream(0).synchronize();
  expect_same(async_back, host, 0, 0, "non-blocking device to pinned host");
}

TEST_F(CudaRuntime, AutogradAndAdamOnCudaMatchTheCpu) {
  manual_seed(5);
  auto cpu_model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 4)});
  manual_seed(5);
  auto gpu_model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 4)});
  gpu_model->to(kCuda);
  optim::AdamOptions opts;
  opts.lr = 1e-2;
  optim::AdamW cpu_opt(cpu_model->parameters(), opts), gpu_opt(gpu_model->parameters(), opts);
  Generator g(6);
  Tensor x = randn({8, 16}, DType::Float32, &g);
  Tensor y = randint(0, 4, {8}, DType::Int64, &g);
  for (int step = 0; step < 3; ++step) {
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    Tensor lc = cross_entropy(cpu_model->forward(x), y);
    Tensor lg = cross_entropy(gpu_model->forward(x.cuda()), y.cuda());
    backward(lc);
    backward(lg);
    expect_same(lg, lc, 1e-5, 1e-6, "loss");
    auto pc = cpu_model->named_parameters(), pg = gpu_model->named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      ASSERT_TRUE(grad(pg[i].second).is_cuda()) << "gradients stay on the device";
      expect_same(grad(pg[i].second), grad(pc[i].second), 1e-4, 1e-6, "grad " + pc[i].first);
    }
    cpu_opt.step();
    gpu_opt.step();
  }
  auto pc = cpu_model->named_parameters(), pg = gpu_model->named_parameters();
  for (size_t i = 0; i < pc.size(); ++i) expect_same(pg[i].second, pc[i].second, 1e-4, 1e-6, "weight " + pc[i].first);
}

// Backward formulas that build buffers (select, slice, index_select, gather,
// dropout masks, the causal mask) make them on the gradient's device.
TEST_F(CudaRuntime, FormulasAndMasksStayOnTheDevice) {
  Tensor x = randn({6, 5}, DType::Float32);
  Tensor idx = tensor<int64_t>({0, 3, 3});
  Tensor gi = randint(0, 6, {2, 5}, DType::Int64);
  auto run = [&](Device dev) {
    Tensor xd = detach(x.to(dev));
    set_requires_grad(xd);
    Tensor loss = add(add(sum(select(xd, 0, 1)), sum(slice(xd, 1, 1, 4))),
                      add(sum(index_select(xd, 0, idx.to(dev))), sum(gather(xd, 0, gi.to(dev)))));
    backward(loss);
    return grad(xd);
  };
  Tensor gg = run(kCuda);
  EXPECT_TRUE(gg.is_cuda());
  expect_same(gg, run(Device()), 1e-6, 1e-6, "gradients of the indexing formulas");
  Tensor q = randn({2, 4, 8}, DType::Float32), k = randn({2, 4, 8}, DType::Float32), v = randn({2, 4, 8}, DType::Float32);
  expect_same(nn::scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), Tensor(), true),
              nn::scaled_dot_product_attention(q, k, v, Tensor(), true), 1e-5, 1e-6, "causal attention");
  auto [dropped, mask] = dropout(ones({1000}, TensorOptions(DType::Float32, kCuda)), 0.5, true);
  EXPECT_TRUE(mask.is_cuda());
  const double kept = sum(mask.to(DType::Float32)).item<double>();
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
}

TEST_F(CudaRuntime, GradientsFlowBackAcrossDevices) {
  Tensor x = randn({4, 3}, DType::Float32);
  set_requires_grad(x);
  Tensor y = mul(x.cuda(), scalar_tensor(2.0));  // CPU -> GPU inside the graph
  backward(sum(y.cpu()));                         // and back
  ASSERT_TRUE(grad(x).defined());
  EXPECT_TRUE(grad(x).device().is_cpu()) << "the gradient returns to the leaf's device";
  expect_same(grad(x), full({4, 3}, 2.0, DType::Float32), 0, 0, "d(sum(2x))/dx");
}

}  // namespace
}  // namespace trainrun::cuda
