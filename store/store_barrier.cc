#include "store/store_barrier.h"

#include "base/error.h"

namespace trainrun {

int64_t store_barrier_arrive(Store& store, const std::string& key, int64_t world_size) {
  TR_CHECK(world_size >= 1, ValueError, "store_barrier('{}'): world_size must be positive, got {}", key, world_size);
  const int64_t n = store.add(key + "/arrived", 1);
  TR_CHECK(n <= world_size, ValueError,
           "store_barrier('{}'): {} participants arrived but world_size is {}; reuse of a barrier key?", key, n,
           world_size);
  if (n == world_size) store.set(key + "/done", std::string("1"));
  return n;
}

void store_barrier_wait(Store& store, const std::string& key, int64_t world_size, Milliseconds timeout) {
  try {
    store.wait({key + "/done"}, timeout);
  } catch (const TimeoutError&) {
    throw StoreTimeoutError(fmt::format("store_barrier('{}'): only {} of {} participants arrived within {} ms", key,
                                   store.add(key + "/arrived", 0), world_size, timeout.count()));
  }
}

void store_barrier(Store& store, const std::string& key, int64_t world_size, Milliseconds timeout) {
  store_barrier_arrive(store, key, world_size);
  store_barrier_wait(store, key, world_size, timeout);
}

}  // namespace trainrun
