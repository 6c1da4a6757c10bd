// The trainrun side of tests/python/test_train_parity.py: builds MODEL
// ("mlp": Linear-GELU-Linear with cross-entropy; "cnn": Conv2d-BatchNorm2d-
// ReLU-MaxPool2d-Conv2d(groups 2)-ReLU-AvgPool2d-Flatten-Linear with
// cross-entropy; or "block": a pre-norm transformer block with MSE), loads its weights and batch from IN
// (safetensors written by PyTorch), trains STEPS steps of OPT ("adamw":
// lr 1e-2, weight decay 1e-2; "sgd": lr 0.1, momentum 0.9), and writes every
// step's loss, the first step's gradients and the final weights to OUT.
//   train_parity MODEL OPT IN OUT STEPS
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "nn/attention.h"
#include "nn/batch_norm.h"
#include "nn/conv_pool.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "tensor/ops.h"

using namespace trainrun;

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "";
  if (argc != 6 || (model != "mlp" && model != "cnn" && model != "block") ||
      (std::strcmp(argv[2], "adamw") != 0 && std::strcmp(argv[2], "sgd") != 0)) {
    std::fprintf(stderr, "usage: train_parity mlp|cnn|block adamw|sgd IN OUT STEPS\n");
    return 2;
  }
  try {
    auto in = load_safetensors(argv[3]);
    const int steps = std::atoi(argv[5]);
    std::shared_ptr<nn::Module> net;
    if (model == "mlp") {
      const int64_t d_in = in.at("0.weight").size(1), hidden = in.at("0.weight").size(0),
                    d_out = in.at("2.weight").size(0);
      net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Linear>(d_in, hidden), std::make_shared<nn::GELU>(),
          std::make_shared<nn::Linear>(hidden, d_out)});
    } else if (model == "cnn") {
      const int64_t c_in = in.at("0.weight").size(1), c1 = in.at("0.weight").size(0), c2 = in.at("4.weight").size(0);
      net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Conv2d>(c_in, c1, IntList{3}, IntList{1}, IntList{1}, IntList{1}, 1, /*bias=*/false),
          std::make_shared<nn::BatchNorm2d>(c1), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::MaxPool2d>(IntList{2}),
          std::make_shared<nn::Conv2d>(c1, c2, IntList{3}, IntList{1}, IntList{1}, IntList{1}, 2),
          std::make_shared<nn::ReLU>(), std::make_shared<nn::AvgPool2d>(IntList{2}), std::make_shared<nn::Flatten>(),
          std::make_shared<nn::Linear>(in.at("8.weight").size(1), in.at("8.weight").size(0))});
    } else {
      net = std::make_shared<nn::TransformerBlock>(in.at("ln_1.weight").size(0), in.at("num_heads").item<int64_t>());
    }
    nn::StateDict weights;
    for (auto& [name, _] : net->state_dict()) weights[name] = in.at(name);
    net->load_state_dict(weights);
    std::unique_ptr<optim::Optimizer> opt;
    if (std::strcmp(argv[2], "adamw") == 0) {
      optim::AdamOptions o;
      o.lr = 1e-2;
      o.weight_decay = 0.01;
      opt = std::make_unique<optim::AdamW>(net->parameters(), o);
    } else {
      optim::SGDOptions o;
      o.lr = 0.1;
      o.momentum = 0.9;
      opt = std::make_unique<optim::SGD>(net->parameters(), o);
    }
    std::map<std::string, Tensor> out;
    for (int step = 0; step < steps; ++step) {
      opt->zero_grad();
      Tensor y = (*net)(in.at("x"));
      Tensor loss = model == "block" ? nn::mse_loss(y, in.at("target")) : cross_entropy(y, in.at("target"));
      backward(loss);
      out["loss." + std::to_string(step)] = detach(loss);
      if (step == 0)
        for (auto& [name, p] : net->named_parameters()) out["grad." + name] = grad(p);
      opt->step();
    }
    for (auto& [name, t] : net->state_dict()) out["param." + name] = t;
    save_safetensors(out, argv[4]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_parity: %s\n", e.what());
    return 1;
  }
  return 0;
}
