// The NCCL backend. On any machine: it registers with init_process_group, and
// refuses what it cannot do with errors that name the problem (CPU tensors,
// bitwise reductions, receives from any source, no GPU). With one GPU: the
// collectives on a one-rank group. With two or more: nccl_worker ranks, one
// per GPU, under the trainrun launcher (collectives, DDP, a timeout).
#include <gtest/gtest.h>

#include <cstdlib>

#include "c10d/distributed.h"
#include "c10d/nccl/process_group_nccl.h"
#include "store/hash_store.h"
#include "tensor/cuda/runtime.h"
#include "tensor/ops.h"
#include "tests/expect_error.h"
#include "tests/multirank/run_ranks.h"

namespace trainrun {
namespace c10d {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<ProcessGroupNCCL> one_rank_group(Milliseconds timeout = 30s) {
  ProcessGroupNCCL::Options o;
  o.timeout = timeout;
  return std::make_shared<ProcessGroupNCCL>(std::make_shared<HashStore>(), 0, 1, "solo", o);
}

TEST(Nccl, RegistersWithInitProcessGroup) {
  auto names = available_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "nccl"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "gloo"), names.end());
  InitOptions o;
  o.backend = "nccl";
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  init_process_group(o);  // touches no GPU
  EXPECT_EQ(default_group()->backend_name(), "nccl");
  destroy_process_group();
  o.backend = "mpi";
  expect_error<ValueError>([&] { init_process_group(o); }, {"backend 'mpi' is not available", "gloo, nccl"});
}

TEST(Nccl, RefusesWhatItCannotDoByName) {
  auto pg = one_rank_group();
  Tensor cpu = ones({4});
  expect_error<TypeError>([&] { pg->allreduce(cpu); },
                          {"allreduce on group 'solo' (nccl)", "expected CUDA tensors", "on cpu", "gloo"});
  expect_error<TypeError>([&] { pg->allreduce(cpu, ReduceOp::BXOR); }, {"BXOR", "not supported by NCCL"});
  expect_error<TypeError>([&] { pg->allreduce(cpu, ReduceOp::premul_sum(2.0)); }, {"expected CUDA tensors"});
  Tensor i = ones({4}, DType::Int64);
  expect_error<TypeError>([&] { pg->allreduce(i, ReduceOp::premul_sum(2.0)); }, {"PREMUL_SUM needs a floating"});
  expect_error<NotImplementedError>([&] { pg->recv_anysource(cpu); }, {"any source"});
  expect_error<ValueError>([&] { pg->broadcast(cpu, 3); }, {"root"});
}

TEST(Nccl, WithoutAGpuTheReasonIsNamed) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  auto pg = one_rank_group();
  expect_error<CudaError>([&] { pg->barrier(); }, {"CUDA is not available"});
}

class NcclOneGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "needs a GPU: " << cuda::unavailable_reason();
  }
};

TEST_F(NcclOneGpu, CollectivesOnOneRank) {
  auto pg = one_rank_group();
  const Device dev(DeviceType::CUDA, 0);
  Tensor t = arange(10, TensorOptions(DType::Float32, dev));
  pg->allreduce(t)->wait();
  EXPECT_TRUE(allclose(t.cpu(), arange(10, DType::Float32)));
  Tensor p = full({3}, 4.0, TensorOptions(DType::Float32, dev));
  pg->allreduce(p, ReduceOp::premul_sum(0.25))->wait();
  EXPECT_TRUE(allclose(p.cpu(), ones({3})));
  Tensor out = empty({10}, TensorOptions(DType::Float32, dev));
  pg->all_gather_into_tensor(out, t)->wait();
  EXPECT_TRUE(allclose(out.cpu(), t.cpu()));
  std::vector<Tensor> many = {ones({2}, TensorOptions(DType::BFloat16, dev)), ones({3}, TensorOptions(DType::Int64, dev))};
  pg->allreduce_coalesced(many)->wait();
  auto b = pg->barrier();
  b->wait();
  EXPECT_TRUE(b->is_completed());
  // Completion is seen by the watchdog, and then() callbacks run.
  bool called = false;
  auto w = pg->allreduce(t)->then([&](Work&) { called = true; });
  w->wait(10s);
  EXPECT_TRUE(called);
}

multirank::RankRun run_ranks(const std::string& scenario, int world) {
  multirank::RankRunOptions o;
  o.world = world;
  o.deadline = 180s;
  return multirank::run_ranks("tests/c10d/nccl_worker", scenario, o);
}

class NcclMultiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() < 2)
      GTEST_SKIP() << "needs 2 or more GPUs, this machine has " << cuda::device_count()
                   << (cuda::is_available() ? "" : " (" + cuda::unavailable_reason() + ")");
  }
  int world() const { return std::min(cuda::device_count(), 4); }
};

TEST_F(NcclMultiGpu, CollectivesAcrossRanks) { multirank::expect_ranks_passed(run_ranks("collectives", world())); }

TEST_F(NcclMultiGpu, DdpGradientsMatchOneProcess) { multirank::expect_ranks_passed(run_ranks("ddp", world())); }

TEST_F(NcclMultiGpu, ASkippedCollectiveTimesOutNamingIt) {
  const multirank::RankRun run = run_ranks("timeout", world());
  EXPECT_EQ(run.exit_code, 0) << run.output_of(0);
  EXPECT_NE(run.output_of(0).find("allreduce #2"), std::string::npos) << run.output_of(0);
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun
