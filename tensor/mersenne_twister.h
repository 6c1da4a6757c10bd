#pragma once
// PyTorch's CPU random engine, draw for draw: the 32-bit Mersenne Twister
// (mt19937), seeded with a seed's low 32 bits, plus the two cached Box-Muller
// values PyTorch's generator keeps between serial normal draws. Its state
// serializes to PyTorch's CPUGeneratorImplState byte for byte (5056 bytes),
// so torch.get_rng_state() moves between PyTorch and trainrun.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace trainrun {

class MersenneTwister {
 public:
  static constexpr int kStateWords = 624;
  static constexpr size_t kSerializedBytes = 5056;

  explicit MersenneTwister(uint64_t seed = 67280421310721ull) { seed_with(seed); }
  // The seed is kept whole (initial_seed()); the engine starts from its low 32 bits, as PyTorch's.
  void seed_with(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }

  uint32_t random() {
    if (--left_ == 0) next_state();
    uint32_t y = state_[next_++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
  }
  // Two outputs, the first as the high half (PyTorch's random64).
  uint64_t random64() {
    const uint64_t hi = random();
    return (hi << 32) | random();
  }

  // The second value of the last serial Box-Muller pair, used by the next serial normal draw.
  std::optional<double> next_double_normal;
  std::optional<float> next_float_normal;

  std::vector<uint8_t> serialize() const;
  // Takes what serialize() (or torch.get_rng_state()) gave; refuses anything else by its size.
  void deserialize(const uint8_t* bytes, size_t n);

 private:
  void next_state();

  uint64_t seed_ = 0;
  int left_ = 1;
  uint32_t next_ = 0;
  std::array<uint32_t, kStateWords> state_{};
};

}  // namespace trainrun
