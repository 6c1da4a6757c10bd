#pragma once
// A barrier over any store: each of world_size participants calls it with
// the same key (a fresh key per barrier, e.g. with a sequence number). The
// last to arrive sets "<key>/done", which wakes the others' WAIT at once
// (torch's store-based barrier polls a counter every 10 ms instead).
#include <string>

#include "store/store.h"

namespace trainrun {

// Throws TimeoutError saying how many of world_size arrived.
void store_barrier(Store& store, const std::string& key, int64_t world_size, Milliseconds timeout);

}  // namespace trainrun
