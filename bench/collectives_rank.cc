// One rank of bench/collectives.py on trainrun's gloo process group: times
// each collective at each size and, on rank 0, prints
// "<op>\t<bytes>\t<median seconds>" lines.
//   RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. collectives_rank ITERS SIZE...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "c10d/distributed.h"
#include "tensor/ops.h"

using namespace trainrun;
using namespace trainrun::c10d;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: collectives_rank ITERS BYTES...\n");
    return 2;
  }
  const int iters = std::atoi(argv[1]);
  try {
    init_process_group();
    auto pg = default_group();
    const int n = pg->size();
    for (int a = 2; a < argc; ++a) {
      const int64_t bytes = std::atoll(argv[a]);
      const int64_t numel = bytes / 4;  // float32
      Tensor buf = ones({numel});
      Tensor chunk = ones({numel / n});
      Tensor whole = ones({numel / n * n});
      struct Op {
        const char* name;
        std::function<std::shared_ptr<Work>()> run;
      };
      std::vector<Op> ops = {
          {"allreduce", [&] { return pg->allreduce(buf); }},
          {"allgather", [&] { return pg->all_gather_into_tensor(whole, chunk); }},
          {"reduce_scatter", [&] { return pg->reduce_scatter_tensor(chunk, whole); }},
          {"broadcast", [&] { return pg->broadcast(buf, 0); }},
      };
      for (auto& op : ops) {
        for (int i = 0; i < 2; ++i) op.run()->wait();  // warm-up
        std::vector<double> t;
        for (int i = 0; i < iters; ++i) {
          pg->barrier()->wait();  // every rank starts together
          auto t0 = std::chrono::steady_clock::now();
          op.run()->wait();
          t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(t.begin(), t.end());
        if (pg->rank() == 0) std::printf("%s\t%lld\t%.9f\n", op.name, static_cast<long long>(bytes), t[t.size() / 2]);
        std::fflush(stdout);
      }
    }
    destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collectives_rank: %s\n", e.what());
    return 1;
  }
  return 0;
}
