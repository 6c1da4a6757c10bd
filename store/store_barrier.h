#pragma once
// A barrier over any store: each of world_size participants arrives with the
// same key (a fresh key per barrier, e.g. with a sequence number). The last
// to arrive sets "<key>/done", which wakes every waiter's WAIT at once
// (torch's store-based barrier polls a counter every 10 ms instead).
//
// Arriving and waiting are separate so that some participants can arrive
// without waiting: the launcher's nodes report the end of a job, and only
// the node that hosts the store waits for all of them before closing it.
#include <string>

#include "store/store.h"

namespace trainrun {

// Counts this participant in; returns how many have arrived. Throws
// ValueError when more than world_size arrive (a reused key).
int64_t store_barrier_arrive(Store& store, const std::string& key, int64_t world_size);
// Waits until all world_size have arrived; throws TimeoutError saying how
// many of world_size arrived.
void store_barrier_wait(Store& store, const std::string& key, int64_t world_size, Milliseconds timeout);
// Both: arrive, then wait for the others.
void store_barrier(Store& store, const std::string& key, int64_t world_size, Milliseconds timeout);

}  // namespace trainrun
