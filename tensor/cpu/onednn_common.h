#pragma once
// What the CPU kernels on oneDNN (conv_onednn, matmul_onednn) share: the
// engine, a least-recently-used cache of built primitives (building one
// JIT-compiles kernels), OpenMP's thread count, and per-call temporaries.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>

#include "tensor/allocator.h"
#include "tensor/thread_pool.h"

namespace trainrun {
namespace onednn {

inline const dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN runs on OpenMP; keep it to our thread count (thread_pool.h's
// openmp_threads says when one).
inline void set_omp_threads() { omp_set_num_threads(openmp_threads()); }

// A primitive's shape: everything that changes what oneDNN builds.
template <size_t N>
using Key = std::array<int64_t, N>;

template <size_t N>
struct KeyHash {
  size_t operator()(const Key<N>& k) const {
    size_t h = 0;
    for (int64_t v : k) h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

template <typename Plan, size_t N>
class PlanCache {
 public:
  template <typename Make>
  std::shared_ptr<Plan> get(const Key<N>& key, Make make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      order_.splice(order_.begin(), order_, it->second.second);
      return it->second.first;
    }
    std::shared_ptr<Plan> plan = make();
    order_.push_front(key);
    map_.emplace(key, std::make_pair(plan, order_.begin()));
    if (map_.size() > kCapacity) {
      map_.erase(order_.back());
      order_.pop_back();
    }
    return plan;
  }

 private:
  static constexpr size_t kCapacity = 64;
  std::mutex mu_;
  std::list<Key<N>> order_;
  std::unordered_map<Key<N>, std::pair<std::shared_ptr<Plan>, typename std::list<Key<N>>::iterator>, KeyHash<N>>
      map_;
};

// A temporary of a primitive's: its scratchpad, or an argument in the
// blocked layout its kernel wants; ours per call (primitives are shared
// between threads), uninitialised on purpose (kernels write before they
// read). Taken from the CPU allocator's cache, so a call reuses the pages
// the last one touched: allocated by oneDNN (or with new[]), the 6 MiB
// reorder buffers of a 8x64x56x56 conv2d came back from the kernel as fresh
// pages at every call, 3100 page faults costing 10 ms of a 15 ms forward.
struct Buffer {
  explicit Buffer(const dnnl::memory::desc& d)
      : bytes(cpu_allocator()->allocate(std::max<size_t>(d.get_size(), 1))),
        memory(d, cpu_engine(), bytes.get()) {}
  DataPtr bytes;
  dnnl::memory memory;
};

}  // namespace onednn
}  // namespace trainrun
