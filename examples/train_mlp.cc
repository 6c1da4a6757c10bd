// Trains a small MLP classifier on a synthetic task with autograd, nn and
// AdamW, printing the loss as it falls and the final accuracy, in one
// process (the main job, train_digits.cc, is the multi-process one).
#include <cstdio>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "nn/layers.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/lr_scheduler.h"
#include "tensor/ops.h"

using namespace trainrun;

int main() {
  manual_seed(0);
  // Points in 16-D whose class is the argmax of a fixed random projection,
  // plus noise: learnable, but not linearly trivial after the noise.
  const int64_t n = 2048, d = 16, classes = 4;
  Tensor x = randn({n, d});
  Tensor labels = argmax(add(mm(x, randn({d, classes})), mul(randn({n, classes}), 0.3)), 1);

  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(d, 64), std::make_shared<nn::GELU>(), std::make_shared<nn::LayerNorm>(IntList{64}),
      std::make_shared<nn::Linear>(64, classes)});
  optim::AdamOptions o;
  o.lr = 3e-3;
  o.weight_decay = 1e-2;
  optim::AdamW opt(net->parameters(), o);
  optim::CosineAnnealingLR schedule(opt, 300);

  const int64_t batch = 128;
  for (int step = 0; step < 300; ++step) {
    int64_t start = (step * batch) % n;
    Tensor xb = narrow(x, 0, start, batch), yb = narrow(labels, 0, start, batch);
    opt.zero_grad();
    Tensor loss = cross_entropy((*net)(xb), yb);
    backward(loss);
    optim::clip_grad_norm_(net->parameters(), 1.0);
    opt.step();
    schedule.step();
    if (step % 50 == 0 || step == 299) std::printf("step %3d  loss %.4f\n", step, loss.item<double>());
  }
  NoGradGuard no_grad;
  net->eval();
  double accuracy = mean(eq(argmax((*net)(x), 1), labels).to(DType::Float64)).item<double>();
  std::printf("train accuracy %.3f\n", accuracy);
  return accuracy > 0.8 ? 0 : 1;
}
