#pragma once
// Learning-rate schedules (torch.optim.lr_scheduler): each step() advances
// the epoch and writes every group's lr from its closed form.
#include <functional>
#include <memory>
#include <vector>

#include "nn/optim/optimizer.h"

namespace trainrun {
namespace optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return epoch_; }
  std::vector<double> get_last_lr() const;
  // The lr of group g at `epoch` (also used by SequentialLR).
  virtual double lr_at(size_t group, int64_t epoch) const = 0;
  void apply(int64_t epoch);

 protected:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& o, int64_t step_size, double gamma = 0.1);
  double lr_at(size_t g, int64_t epoch) const override;
  int64_t step_size;
  double gamma;
};

class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& o, int64_t t_max, double eta_min = 0);
  double lr_at(size_t g, int64_t epoch) const override;
  int64_t t_max;
  double eta_min;
};

// Warm-up: the factor goes linearly from start_factor to end_factor over total_iters.
class LinearLR final : public LRScheduler {
 public:
  LinearLR(Optimizer& o, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  double lr_at(size_t g, int64_t epoch) const override;
  double start_factor, end_factor;
  int64_t total_iters;
};

class LambdaLR final : public LRScheduler {
 public:
  LambdaLR(Optimizer& o, std::function<double(int64_t)> factor);
  double lr_at(size_t g, int64_t epoch) const override;
  std::function<double(int64_t)> factor;
};

// Runs schedulers[i] from milestones[i-1] on, each counting from 0 there.
class SequentialLR final : public LRScheduler {
 public:
  SequentialLR(Optimizer& o, std::vector<std::shared_ptr<LRScheduler>> schedulers, std::vector<int64_t> milestones);
  double lr_at(size_t g, int64_t epoch) const override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace optim
}  // namespace trainrun
