// Times one training step (forward + backward + AdamW) of the MLP row of
// bench/train_step.py and prints "<row>\t<median seconds>".
//   train_step THREADS REPS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "autograd/engine.h"
#include "nn/layers.h"
#include "nn/optim/adam.h"
#include "tensor/ops.h"

using namespace trainrun;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2, reps = argc > 2 ? std::atoi(argv[2]) : 20;
  set_num_threads(threads);
  manual_seed(0);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 1024),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 10)});
  optim::AdamOptions o;
  o.weight_decay = 0.01;
  optim::AdamW opt(net->parameters(), o);
  Tensor x = randn({64, 784}), y = randint(0, 10, {64});
  auto step = [&] {
    opt.zero_grad();
    backward(cross_entropy((*net)(x), y));
    opt.step();
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: allocations, BLAS threads
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    step();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  std::printf("mlp\t%.9f\n", t[t.size() / 2]);
  return 0;
}
