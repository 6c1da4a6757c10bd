#pragma once
// A random generator with PyTorch's two engines. CPU draws come from the
// Mersenne Twister PyTorch's CPU generator is, with its transforms
// (tensor/cpu/pytorch_cpu_draws.h): the same seed gives PyTorch's values.
// CUDA draws are counter-based (Philox 4x32-10, as PyTorch's CUDA generator
// and JAX use): element i of a draw takes counter (offset + i), so its value
// is fixed by (seed, offset, i) and never depends on how the work is split.
// manual_seed seeds both.
#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tensor/mersenne_twister.h"

namespace trainrun {

// One Philox4x32-10 block: 4 random 32-bit words for (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed), cpu_engine_(seed) {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }
  // Reserves `n` counters and returns the first; the generator moves past them.
  uint64_t reserve(uint64_t n);
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

  // Everything a later draw depends on (both engines), to draw the same again after restore().
  struct Snapshot {
    uint64_t seed = 0, offset = 0;
    std::vector<uint8_t> cpu_engine;
  };
  Snapshot snapshot();
  void restore(const Snapshot& s);

  // The CPU engine; hold mutex() while drawing from it or copying its state.
  MersenneTwister& cpu_engine() { return cpu_engine_; }
  std::mutex& mutex() { return mu_; }

 private:
  std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  MersenneTwister cpu_engine_;
};

// The process-wide default generator (torch.manual_seed seeds it).
Generator& default_generator();
void manual_seed(uint64_t seed);

// What the CPU random_fill_ kernel draws with, set by the random factories around the op: the generator, and
// whether the tensor drawn into is contiguous (PyTorch draws normals differently when it is not). A compiled
// replay calls the op without a scope: the default generator, contiguous.
class CpuDrawScope {
 public:
  CpuDrawScope(Generator* generator, bool contiguous);
  ~CpuDrawScope();
  CpuDrawScope(const CpuDrawScope&) = delete;
  CpuDrawScope& operator=(const CpuDrawScope&) = delete;
  static Generator& generator();
  static bool contiguous();

 private:
  Generator* saved_generator_;
  bool saved_contiguous_;
};

}  // namespace trainrun
