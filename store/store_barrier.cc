#include "store/store_barrier.h"

#include "base/error.h"

namespace trainrun {

void store_barrier(Store& store, const std::string& key, int64_t world_size, Milliseconds timeout) {
  TR_CHECK(world_size >= 1, ValueError, "store_barrier('{}'): world_size must be positive, got {}", key, world_size);
  const std::string arrived = key + "/arrived", done = key + "/done";
  int64_t n = store.add(arrived, 1);
  TR_CHECK(n <= world_size, ValueError,
           "store_barrier('{}'): {} participants arrived but world_size is {}; reuse of a barrier key?", key, n,
           world_size);
  if (n == world_size) store.set(done, std::string("1"));
  try {
    store.wait({done}, timeout);
  } catch (const TimeoutError&) {
    throw TimeoutError(fmt::format("store_barrier('{}'): only {} of {} participants arrived within {} ms", key,
                                   store.add(arrived, 0), world_size, timeout.count()));
  }
}

}  // namespace trainrun
