// One rank of the multi-process store test: registers, publishes its
// address, meets the others at a barrier, reads every rank's address and
// checks them. Exits 0 on success, 1 with a message otherwise.
//   store_worker PORT RANK WORLD
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "store/store_barrier.h"
#include "store/tcp_store.h"

int main(int argc, char** argv) {
  using namespace trainrun;
  if (argc != 4) {
    std::fprintf(stderr, "usage: store_worker PORT RANK WORLD\n");
    return 2;
  }
  const uint16_t port = static_cast<uint16_t>(std::atoi(argv[1]));
  const int rank = std::atoi(argv[2]), world = std::atoi(argv[3]);
  try {
    TCPStoreOptions options;
    options.timeout = Milliseconds(20000);
    options.num_workers = world;  // registers under "init/" like torch
    TCPStore store("127.0.0.1", port, options);
    store.set("addr/" + std::to_string(rank), "10.0.0." + std::to_string(rank));
    store.add("arrived", 1);
    store.append("log", to_bytes(std::to_string(rank) + ";"));
    store_barrier(store, "barrier0", world, Milliseconds(20000));
    if (store.add("arrived", 0) != world) throw Error("the barrier let a rank through early");
    std::vector<std::string> keys;
    for (int r = 0; r < world; ++r) keys.push_back("addr/" + std::to_string(r));
    std::vector<Bytes> addrs = store.multi_get(keys);
    for (int r = 0; r < world; ++r)
      if (to_string(addrs[r]) != "10.0.0." + std::to_string(r)) throw Error("wrong address for rank " + std::to_string(r));
    // Rank 0 hands out a token with compare_set; everyone waits for it.
    if (rank == 0) store.compare_set("token", {}, to_bytes("go"));
    if (store.get_string("token") != "go") throw Error("wrong token");
    store_barrier(store, "barrier1", world, Milliseconds(20000));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_worker rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
