// Times one training step (forward + backward + AdamW) of each row of
// bench/train_step.py and prints "<row>\t<median seconds>".
//   train_step THREADS REPS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "autograd/engine.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim/adam.h"
#include "tensor/ops.h"

using namespace trainrun;

double median_step_seconds(const std::function<void()>& step, int reps) {
  for (int i = 0; i < 3; ++i) step();  // warm-up: allocations, BLAS threads
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    step();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2, reps = argc > 2 ? std::atoi(argv[2]) : 20;
  set_num_threads(threads);
  manual_seed(0);
  optim::AdamOptions o;
  o.weight_decay = 0.01;

  auto mlp = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 1024),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 10)});
  optim::AdamW mlp_opt(mlp->parameters(), o);
  Tensor x = randn({64, 784}), y = randint(0, 10, {64});
  std::printf("mlp\t%.9f\n", median_step_seconds(
                                 [&] {
                                   mlp_opt.zero_grad();
                                   backward(cross_entropy((*mlp)(x), y));
                                   mlp_opt.step();
                                 },
                                 reps));

  auto block = std::make_shared<nn::TransformerBlock>(256, 4);
  optim::AdamW block_opt(block->parameters(), o);
  Tensor xb = randn({8, 128, 256}), target = randn({8, 128, 256});
  std::printf("block\t%.9f\n", median_step_seconds(
                                   [&] {
                                     block_opt.zero_grad();
                                     backward(nn::mse_loss((*block)(xb), target));
                                     block_opt.step();
                                   },
                                   std::max(3, reps / 2)));
  return 0;
}
