// One rank of bench/ddp.py: the MLP 784-1024-1024-10 at batch 64 per rank,
// forward + backward + AdamW, under DistributedDataParallel (WORLD_SIZE > 1)
// or alone; rank 0 prints "<median seconds per step>".
//   RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. ddp_rank STEPS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "autograd/engine.h"
#include "c10d/ddp/distributed_data_parallel.h"
#include "c10d/distributed.h"
#include "nn/layers.h"
#include "nn/optim/adam.h"
#include "tensor/ops.h"

using namespace trainrun;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
  try {
    const char* ws = std::getenv("WORLD_SIZE");
    const bool distributed = ws != nullptr && std::atoi(ws) > 1;
    set_num_threads(1);
    manual_seed(0);
    auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 1024),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 10)});
    std::shared_ptr<nn::Module> model = net;
    int rank = 0;
    if (distributed) {
      c10d::init_process_group();
      rank = c10d::get_rank();
      model = std::make_shared<c10d::DistributedDataParallel>(net);
    }
    optim::AdamOptions o;
    o.weight_decay = 0.01;
    optim::AdamW opt(model->parameters(), o);
    Tensor x = randn({64, 784}), y = randint(0, 10, {64});
    std::vector<double> t;
    for (int s = 0; s < steps + 3; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      backward(cross_entropy((*model)(x), y));
      opt.step();
      if (s >= 3) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    if (rank == 0) std::printf("%.9f\n", t[t.size() / 2]);
    if (distributed) c10d::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_rank: %s\n", e.what());
    return 1;
  }
  return 0;
}
