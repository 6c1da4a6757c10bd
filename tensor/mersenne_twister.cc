#include "tensor/mersenne_twister.h"

#include <cstring>

#include "base/error.h"

namespace trainrun {
namespace {

constexpr int kN = MersenneTwister::kStateWords, kM = 397;

uint32_t twist(uint32_t u, uint32_t v) {
  const uint32_t mixed = (u & 0x80000000u) | (v & 0x7fffffffu);
  return (mixed >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

// PyTorch's CPUGeneratorImplState on x86-64: the legacy POD (initial seed, left, seeded, next, the 624 words
// widened to 64 bits, three doubles of which normal_y is the cached normal, its valid flag), then the cached
// float normal and its flag.
constexpr size_t kSeedAt = 0, kLeftAt = 8, kSeededAt = 12, kNextAt = 16, kWordsAt = 24;
constexpr size_t kNormalYAt = kWordsAt + 8 * kN + 8, kNormalValidAt = kWordsAt + 8 * kN + 24;
constexpr size_t kFloatNormalAt = 5048, kFloatNormalValidAt = 5052;

template <typename T>
void put(std::vector<uint8_t>& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T get(const uint8_t* in, size_t at) {
  T value;
  std::memcpy(&value, in + at, sizeof(T));
  return value;
}

}  // namespace

void MersenneTwister::seed_with(uint64_t seed) {
  seed_ = seed;
  state_[0] = static_cast<uint32_t>(seed & 0xffffffffu);
  for (int j = 1; j < kN; ++j)
    state_[j] = 1812433253u * (state_[j - 1] ^ (state_[j - 1] >> 30)) + static_cast<uint32_t>(j);
  left_ = 1;
  next_ = 0;
  next_double_normal.reset();
  next_float_normal.reset();
}

void MersenneTwister::next_state() {
  uint32_t* p = state_.data();
  left_ = kN;
  next_ = 0;
  for (int j = kN - kM + 1; --j; ++p) *p = p[kM] ^ twist(p[0], p[1]);
  for (int j = kM; --j; ++p) *p = p[kM - kN] ^ twist(p[0], p[1]);
  *p = p[kM - kN] ^ twist(p[0], state_[0]);
}

std::vector<uint8_t> MersenneTwister::serialize() const {
  std::vector<uint8_t> out(kSerializedBytes, 0);
  put<uint64_t>(out, kSeedAt, seed_);
  put<int32_t>(out, kLeftAt, left_);
  put<int32_t>(out, kSeededAt, 1);
  put<uint64_t>(out, kNextAt, next_);
  for (int j = 0; j < kN; ++j) put<uint64_t>(out, kWordsAt + 8 * static_cast<size_t>(j), state_[j]);
  if (next_double_normal) {
    put<double>(out, kNormalYAt, *next_double_normal);
    put<int32_t>(out, kNormalValidAt, 1);
  }
  if (next_float_normal) {
    put<float>(out, kFloatNormalAt, *next_float_normal);
    out[kFloatNormalValidAt] = 1;
  }
  return out;
}

void MersenneTwister::deserialize(const uint8_t* in, size_t n) {
  TR_CHECK(n == kSerializedBytes, Error,  // (RuntimeError, as PyTorch's)
           "set_rng_state: expected a CPUGeneratorImplState of size {} (what get_rng_state gives, PyTorch's "
           "layout) but found the input RNG state size to be {}", kSerializedBytes, n);
  const auto left = get<int32_t>(in, kLeftAt);
  const auto next = get<uint64_t>(in, kNextAt);
  TR_CHECK(left >= 1 && left <= kN && next <= static_cast<uint64_t>(kN), Error,
           "set_rng_state: not a generator state (position {} with {} words left)", next, left);
  seed_ = get<uint64_t>(in, kSeedAt);
  left_ = left;
  next_ = static_cast<uint32_t>(next);
  for (int j = 0; j < kN; ++j)
    state_[j] = static_cast<uint32_t>(get<uint64_t>(in, kWordsAt + 8 * static_cast<size_t>(j)));
  next_double_normal.reset();
  next_float_normal.reset();
  if (get<int32_t>(in, kNormalValidAt)) next_double_normal = get<double>(in, kNormalYAt);
  if (in[kFloatNormalValidAt]) next_float_normal = get<float>(in, kFloatNormalAt);
}

}  // namespace trainrun
