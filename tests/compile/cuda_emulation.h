#pragma once
// Runs generated CUDA kernels on the CPU, for suites on machines without a
// GPU: a prelude that makes compile/cuda_loop_codegen.h's source plain C++
// (g++ compiles it like the CPU loops), where a launch runs each block in
// turn with one std::thread per CUDA thread, __syncthreads a barrier of
// the block and __shfl_xor_sync an exchange within each warp of 32. Slow,
// but every thread runs the code the GPU would, in a real interleaving.
namespace trainrun::compile {

inline const char* cuda_emulation_prelude() {
  return R"(// The CUDA names generated kernels use, emulated with threads (tests/compile/cuda_emulation.h).
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
class TrBarrier {
 public:
  explicit TrBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const long generation = generation_;
    if (++waiting_ == n_) { waiting_ = 0; ++generation_; cv_.notify_all(); return; }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }
 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, waiting_ = 0;
  long generation_ = 0;
};
static thread_local TrBarrier* tr_block_barrier = nullptr;
static thread_local TrBarrier* tr_warp_barrier = nullptr;
static thread_local float* tr_warp_slots = nullptr;
static inline void __syncthreads() { tr_block_barrier->wait(); }
static inline float __shfl_xor_sync(unsigned, float v, int offset) {
  const unsigned lane = threadIdx.x & 31;
  tr_warp_barrier->wait();  // (the previous exchange's reads are done)
  tr_warp_slots[lane] = v;
  tr_warp_barrier->wait();
  return tr_warp_slots[lane ^ static_cast<unsigned>(offset)];
}
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, sizeof f); return f; }
// Runs `kernel(args)` as a grid of `grid` blocks of `block` threads (a multiple of 32), block after block.
extern "C" void tr_emulate_launch(void (*kernel)(void**), void** args, unsigned grid, unsigned block) {
  std::vector<float> slots(block);
  for (unsigned b = 0; b < grid; ++b) {
    TrBarrier block_barrier(static_cast<int>(block));
    std::vector<std::unique_ptr<TrBarrier>> warps;
    for (unsigned w = 0; w < block / 32; ++w) warps.push_back(std::make_unique<TrBarrier>(32));
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, b, t] {
        threadIdx.x = t; blockIdx.x = b; blockDim.x = block; gridDim.x = grid;
        tr_block_barrier = &block_barrier;
        tr_warp_barrier = warps[t / 32].get();
        tr_warp_slots = slots.data() + (t / 32) * 32;
        kernel(args);
      });
    for (std::thread& th : threads) th.join();
  }
}
)";
}

}  // namespace trainrun::compile
