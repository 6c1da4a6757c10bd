// The trainrun side of tests/python/test_train_parity.py: loads an MLP's
// weights and a batch from IN (safetensors, written by PyTorch), trains
// STEPS steps of AdamW on cross-entropy, and writes every step's loss, the
// first step's gradients and the final weights to OUT.
//   mlp_parity IN OUT STEPS
#include <cstdio>
#include <cstdlib>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "nn/layers.h"
#include "nn/optim/adam.h"
#include "tensor/ops.h"

using namespace trainrun;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: mlp_parity IN OUT STEPS\n");
    return 2;
  }
  try {
    auto in = load_safetensors(argv[1]);
    const int steps = std::atoi(argv[3]);
    const int64_t d_in = in.at("0.weight").size(1), hidden = in.at("0.weight").size(0), d_out = in.at("2.weight").size(0);
    auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(d_in, hidden), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(hidden, d_out)});
    nn::StateDict weights;
    for (const char* k : {"0.weight", "0.bias", "2.weight", "2.bias"}) weights[k] = in.at(k);
    net->load_state_dict(weights);
    optim::AdamOptions o;
    o.lr = 1e-2;
    o.weight_decay = 0.01;
    optim::AdamW opt(net->parameters(), o);
    std::map<std::string, Tensor> out;
    for (int step = 0; step < steps; ++step) {
      opt.zero_grad();
      Tensor loss = cross_entropy((*net)(in.at("x")), in.at("target"));
      backward(loss);
      out["loss." + std::to_string(step)] = detach(loss);
      if (step == 0)
        for (auto& [name, p] : net->named_parameters()) out["grad." + name] = grad(p);
      opt.step();
    }
    for (auto& [name, t] : net->state_dict()) out["param." + name] = t;
    save_safetensors(out, argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_parity: %s\n", e.what());
    return 1;
  }
  return 0;
}
