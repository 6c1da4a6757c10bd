// bench/cuda: trainrun's CUDA paths against the hardware's own references,
// in one table:
//   - mm in bf16 and f32 (TF32 on and off) against cublasGemmEx called
//     directly on the same buffers (target: within 10%);
//   - elementwise add against the device's copy bandwidth measured with
//     cudaMemcpyAsync (target: at least 80%);
//   - a cached allocate+free against cudaMalloc+cudaFree (target: < 1 us).
// GPU times are CUDA-event medians of several runs. Without a GPU it prints
// why and exits 0.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tensor/cuda/blas_handle.h"
#include "tensor/cuda/cuda_allocator.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/runtime.h"
#include "tensor/ops.h"

using namespace trainrun;

namespace {

constexpr int kRuns = 7;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds per call of fn over kRuns runs of `iters` calls.
double gpu_ms(int iters, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();  // warm up (plans, caches, clocks)
  std::vector<double> runs;
  for (int r = 0; r < kRuns; ++r) {
    cuda::Event start(true), end(true);
    start.record();
    for (int i = 0; i < iters; ++i) fn();
    end.record();
    end.synchronize();
    runs.push_back(start.elapsed_time(end) / iters);
  }
  return median(runs);
}

// Median nanoseconds per call of a host-side fn.
double host_ns(int iters, const std::function<void()>& fn) {
  std::vector<double> runs;
  for (int r = 0; r < kRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) fn();
    runs.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / iters);
  }
  return median(runs);
}

void row(const std::string& what, double ours, double ref, const std::string& unit, const std::string& ref_name,
         const std::string& target) {
  std::printf("| %-34s | %10.2f %-7s | %10.2f %-7s %-24s | %6.3f | %-14s |\n", what.c_str(), ours, unit.c_str(), ref,
              unit.c_str(), ref_name.c_str(), ours / ref, target.c_str());
}

void bench_matmul(DType dt, bool tf32, int64_t n) {
  const Device dev(DeviceType::CUDA, 0);
  Tensor a = randn({n, n}, TensorOptions(dt, dev)), b = randn({n, n}, TensorOptions(dt, dev));
  Tensor c = empty({n, n}, TensorOptions(dt, dev));
  cuda::set_allow_tf32(tf32);
  const double ours = gpu_ms(10, [&] { mm_out(c, a, b); });
  // The same product through cuBLAS directly (row-major C = A B as C^T = B^T A^T).
  cublasHandle_t h = cuda::cublas_handle(0);
  const cudaDataType_t type = dt == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1, zero = 0;
  const double ref = gpu_ms(10, [&] {
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.data_ptr(), type, n, a.data_ptr(), type, n, &zero,
                 c.data_ptr(), type, n, compute, CUBLAS_GEMM_DEFAULT);
  });
  cuda::set_allow_tf32(false);
  const double flop = 2.0 * n * n * n;
  row(fmt::format("mm {} {}^3{}", dtype_name(dt), n, dt == DType::Float32 ? (tf32 ? " TF32" : " no TF32") : ""),
      flop / ours / 1e9, flop / ref / 1e9, "TFLOP/s", "cublasGemmEx", ">= 0.9 ratio");
}

void bench_add(int64_t n) {
  const Device dev(DeviceType::CUDA, 0);
  Tensor a = randn({n}, TensorOptions(DType::Float32, dev)), b = randn({n}, TensorOptions(DType::Float32, dev));
  Tensor out = empty({n}, TensorOptions(DType::Float32, dev));
  const double ours = gpu_ms(20, [&] { add_out(out, a, b); });
  const double copy = gpu_ms(20, [&] {
    cudaMemcpyAsync(out.data_ptr(), a.data_ptr(), n * 4, cudaMemcpyDeviceToDevice, cuda::current_stream(0).handle());
  });
  // add moves 3 arrays (2 reads, 1 write), a copy 2.
  row(fmt::format("add f32 {}M elements", n >> 20), 3.0 * n * 4 / ours / 1e6, 2.0 * n * 4 / copy / 1e6, "GB/s",
      "cudaMemcpy D2D", ">= 0.8 ratio");
}

void bench_allocator() {
  cuda::CachingAllocator& alloc = cuda::caching_allocator(0);
  const uintptr_t stream = cuda::current_stream(0).id();
  alloc.free(alloc.allocate(1 << 20, stream));  // the first one reaches cudaMalloc
  const double cached = host_ns(200000, [&] { alloc.free(alloc.allocate(1 << 20, stream)); });
  const double tensor = host_ns(100000, [&] { empty({1 << 18}, TensorOptions(DType::Float32, Device("cuda:0"))); });
  const double raw = host_ns(200, [&] {
    void* p = nullptr;
    cudaMalloc(&p, 1 << 20);
    cudaFree(p);
  });
  row("alloc+free 1 MiB (allocator)", cached / 1000, raw / 1000, "us", "cudaMalloc+cudaFree", "< 1 us");
  row("empty() 1 MiB tensor + release", tensor / 1000, raw / 1000, "us", "cudaMalloc+cudaFree", "");
}

}  // namespace

int main() {
  if (!cuda::is_available()) {
    std::printf("bench/cuda: skipped: %s\n", cuda::unavailable_reason().c_str());
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("bench/cuda on %s (%d SMs, %.0f GiB); GPU times are CUDA-event medians of %d runs\n\n", prop.name,
              prop.multiProcessorCount, prop.totalGlobalMem / double(1 << 30), kRuns);
  std::printf("| %-34s | %-18s | %-43s | %-6s | %-14s |\n", "measurement", "trainrun", "reference", "ratio", "target");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(20, '-').c_str(),
              std::string(45, '-').c_str(), std::string(8, '-').c_str(), std::string(16, '-').c_str());
  bench_matmul(DType::BFloat16, false, 8192);
  bench_matmul(DType::Float32, true, 8192);
  bench_matmul(DType::Float32, false, 4096);
  bench_add(int64_t(256) << 20);
  bench_add(int64_t(16) << 20);
  bench_allocator();
  return 0;
}
