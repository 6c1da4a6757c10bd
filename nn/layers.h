#pragma once
// The basic layers, each a Module with PyTorch's parameter names, shapes and
// default initialisation: Linear, Embedding, LayerNorm, RMSNorm, Dropout,
// the activations, Softmax, Flatten, and Sequential.
#include "nn/containers.h"
#include "nn/module.h"

namespace trainrun {
namespace nn {

// y = x W^T + b; weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t in_features, out_features;
  bool has_bias;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(IntList normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  IntList normalized_shape;
  double eps;
  bool elementwise_affine;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(IntList normalized_shape, double eps = 1e-6);
  Tensor forward(const Tensor& x) override;
  IntList normalized_shape;
  double eps;
};

// Zeroes elements with probability p in training (scaling the rest by 1/(1-p)).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : Module("GELU"), approximate(std::move(approximate)) {}
  Tensor forward(const Tensor& x) override;
  std::string approximate;
};
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};
class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override;
  int64_t dim;
};

// Merges dims start_dim..end_dim into one (default: everything after the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  int64_t start_dim, end_dim;
};

// Children named "0", "1", ... run in order.
class Sequential : public ModuleList {
 public:
  Sequential() : ModuleList("Sequential", {}) {}
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules) : ModuleList("Sequential", std::move(modules)) {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace nn
}  // namespace trainrun
