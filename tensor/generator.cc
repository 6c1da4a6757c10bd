#include "tensor/generator.h"

#include "tensor/random_draw.h"

namespace trainrun {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  const PhiloxBlock b = philox_block(key, counter_hi, counter_lo);
  return {b.w[0], b.w[1], b.w[2], b.w[3]};
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t first = offset_;
  offset_ += n;
  return first;
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace trainrun
