// Without a usable GPU (this test's machine when CUDA has no driver), every
// CUDA entry point fails with an error that says why, and nothing crashes.
// With a GPU these checks do not apply and skip.
#include <gtest/gtest.h>

#include "tensor/cuda/cuda_allocator.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/pinned_memory.h"
#include "tensor/cuda/runtime.h"
#include "tensor/dispatcher.h"
#include "tensor/ops.h"
#include "tests/expect_error.h"

namespace trainrun::cuda {
namespace {

class NoGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (is_available()) GTEST_SKIP() << "a GPU is present (" << device_name(0) << "): the no-GPU paths do not apply";
  }
};

TEST_F(NoGpu, AvailabilityIsReportedWithTheRuntimesReason) {
  EXPECT_EQ(device_count(), 0);
  EXPECT_FALSE(is_available());
  const std::string reason = unavailable_reason();
  EXPECT_NE(reason.find("CUDA is not available"), std::string::npos) << reason;
  EXPECT_NE(reason.find("cudaError"), std::string::npos) << reason;
}

TEST_F(NoGpu, CreatingACudaTensorNamesTheReason) {
  expect_error<CudaError>([] { empty({2, 3}, TensorOptions(DType::Float32, Device("cuda"))); },
                          {"CUDA is not available"});
  expect_error<CudaError>([] { zeros({4}, TensorOptions(DType::Float32, Device("cuda:1"))); },
                          {"CUDA is not available"});
  Tensor x = ones({3});
  expect_error<CudaError>([&] { x.cuda(); }, {"CUDA is not available"});
  expect_error<CudaError>([&] { x.to(Device("cuda:0")); }, {"CUDA is not available"});
}

TEST_F(NoGpu, StreamsEventsAndMemoryFunctionsNameTheReason) {
  expect_error<CudaError>([] { current_stream(); }, {"CUDA is not available"});
  expect_error<CudaError>([] { stream_from_pool(0); }, {"CUDA is not available"});
  expect_error<CudaError>([] { synchronize(); }, {"CUDA is not available"});
  expect_error<CudaError>([] { memory_stats(0); }, {"CUDA is not available"});
  expect_error<CudaError>([] { pin_memory(ones({2})); }, {"CUDA is not available"});
  Event e;
  EXPECT_TRUE(e.query());  // never recorded: complete, no GPU needed
  empty_cache();           // nothing to return; must not throw
  EXPECT_FALSE(is_pinned(ones({2})));
}

// Runs everywhere: an op with a CPU kernel and neither a CUDA nor a
// device-generic one would fail on CUDA tensors; adding such an op fails here.
TEST(CudaCoverage, EveryOpWithACpuKernelHasACudaKernel) {
  const std::vector<std::string> missing = Dispatcher::get().ops_unsupported_on(DispatchKey::CUDA);
  EXPECT_TRUE(missing.empty()) << "ops without a CUDA kernel: " << fmt::format("{}", fmt::join(missing, ", "));
}

TEST(CudaDevice, DeviceStringsParse) {
  EXPECT_TRUE(Device("cuda:3").is_cuda());
  EXPECT_EQ(Device("cuda:3").index, 3);
  EXPECT_EQ(Device("cuda").index, -1);
  expect_error<ValueError>([] { Device("cuda:x"); }, {"invalid device index", "cuda:x"});
  expect_error<ValueError>([] { Device("gpu"); }, {"invalid device string 'gpu'"});
}

}  // namespace
}  // namespace trainrun::cuda
