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
  cpu_engine_.seed_with(seed);
}

uint64_t Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t first = offset_;
  offset_ += n;
  return first;
}

Generator::Snapshot Generator::snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  return Snapshot{seed_, offset_, cpu_engine_.serialize()};
}

void Generator::restore(const Snapshot& s) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = s.seed;
  offset_ = s.offset;
  cpu_engine_.deserialize(s.cpu_engine.data(), s.cpu_engine.size());
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {
thread_local Generator* t_draw_generator = nullptr;
thread_local bool t_draw_contiguous = true;
}  // namespace

CpuDrawScope::CpuDrawScope(Generator* generator, bool contiguous)
    : saved_generator_(t_draw_generator), saved_contiguous_(t_draw_contiguous) {
  t_draw_generator = generator;
  t_draw_contiguous = contiguous;
}
CpuDrawScope::~CpuDrawScope() {
  t_draw_generator = saved_generator_;
  t_draw_contiguous = saved_contiguous_;
}
Generator& CpuDrawScope::generator() { return t_draw_generator ? *t_draw_generator : default_generator(); }
bool CpuDrawScope::contiguous() { return t_draw_contiguous; }

}  // namespace trainrun
