#pragma once
// Counter-based random numbers (Philox 4x32-10, as PyTorch's CUDA generator
// and JAX use). Element i of a draw takes counter (offset + i), so every
// element's value is fixed by (seed, offset, i): results never depend on how
// the work is split across threads or devices.
#include <array>
#include <cstdint>
#include <mutex>

namespace trainrun {

// One Philox4x32-10 block: 4 random 32-bit words for (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }
  // Reserves `n` counters and returns the first; the generator moves past them.
  uint64_t reserve(uint64_t n);
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

 private:
  std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide default generator (torch.manual_seed seeds it).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace trainrun
