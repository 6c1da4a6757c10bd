// The worker both launchers start in bench/launcher.py: joins the job's
// store (as a client under an agent store, else rank 0 hosts it, as
// PyTorch's env:// does), waits at a barrier for every rank, and exits.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/store_barrier.h"
#include "store/tcp_store.h"

int main() {
  try {
    auto env = [](const char* n) {
      const char* v = std::getenv(n);
      return std::string(v == nullptr ? "" : v);
    };
    const int rank = std::stoi(env("RANK")), world = std::stoi(env("WORLD_SIZE"));
    trainrun::TCPStoreOptions o;
    o.is_master = rank == 0 && env("TORCHELASTIC_USE_AGENT_STORE") != "True";
    o.num_workers = world;
    o.timeout = std::chrono::seconds(60);
    trainrun::TCPStore store(env("MASTER_ADDR"), static_cast<uint16_t>(std::stoi(env("MASTER_PORT"))), o);
    trainrun::store_barrier(store, "bench/barrier", world, std::chrono::seconds(60));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launcher_worker: %s\n", e.what());
    return 1;
  }
  return 0;
}
