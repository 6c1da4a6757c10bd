#pragma once
// One element of a random draw, computed the same way on the CPU and in CUDA
// kernels (the header compiles under both compilers): element i of a draw
// that starts at Philox counter `first` reads block first + i / lanes, so its
// value depends only on (seed, first, i), never on threads or devices.
#include <cmath>
#include <cstdint>

#include "tensor/host_device.h"

namespace trainrun {

enum class RandomDistribution : int64_t { Uniform = 0, Normal = 1, Bernoulli = 2, RandInt = 3 };

struct PhiloxBlock {
  uint32_t w[4];
};

// Philox4x32-10: 4 random words for (key, counter).
TR_HOST_DEVICE inline PhiloxBlock philox_block(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  const uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  const uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

// Whether each element takes two words (two per block) or one (four per
// block): normals, float64 results and integer ranges beyond 2^32 take two.
TR_HOST_DEVICE inline bool random_uses_two_words(RandomDistribution dist, bool float64, double a, double b) {
  return dist == RandomDistribution::Normal || float64 || (dist == RandomDistribution::RandInt && (b - a) > 4294967296.0);
}

// The value made of an element's random words (w1 unused with one word):
// uniform in [a, b), normal(mean a, std b), 1 with probability a
// (bernoulli), or an integer in [a, b).
TR_HOST_DEVICE inline double random_value_of_words(RandomDistribution dist, bool two_words, double a, double b,
                                                   uint32_t w0, uint32_t w1) {
  // Uniform in [0, 1): 24 bits for float, 53 for double.
  const double u = two_words ? ((static_cast<uint64_t>(w0) << 21) ^ (w1 >> 11)) * (1.0 / 9007199254740992.0)
                             : (w0 >> 8) * (1.0 / 16777216.0);
  switch (dist) {
    case RandomDistribution::Uniform:
      return a + (b - a) * u;
    case RandomDistribution::Bernoulli:
      return u < a ? 1 : 0;
    case RandomDistribution::RandInt: {
      const uint64_t range = static_cast<uint64_t>(b - a);
      const uint64_t r = two_words ? ((static_cast<uint64_t>(w0) << 32) | w1) : w0;
      return a + static_cast<double>(r % range);
    }
    case RandomDistribution::Normal: {
      const double u1 = (w0 + 1.0) * (1.0 / 4294967297.0);  // (0, 1]: log is finite
      const double u2 = w1 * (1.0 / 4294967296.0);
      return a + b * ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2);
    }
  }
  return 0;
}

// Element i's words: lane i % lanes of Philox block first + i / lanes.
TR_HOST_DEVICE inline void random_words(const PhiloxBlock& w, bool two_words, int64_t i, uint32_t& w0, uint32_t& w1) {
  w0 = two_words ? w.w[(i % 2) * 2] : w.w[i % 4];
  w1 = two_words ? w.w[(i % 2) * 2 + 1] : 0;
}

// Element i's value (a kernel walking elements in order computes each block once instead: random_fill_cpu).
TR_HOST_DEVICE inline double random_value(RandomDistribution dist, bool two_words, double a, double b, uint64_t key,
                                          uint64_t first, int64_t i) {
  const uint64_t block = two_words ? static_cast<uint64_t>(i) / 2 : static_cast<uint64_t>(i) / 4;
  uint32_t w0, w1;
  random_words(philox_block(key, 0, first + block), two_words, i, w0, w1);
  return random_value_of_words(dist, two_words, a, b, w0, w1);
}

}  // namespace trainrun
