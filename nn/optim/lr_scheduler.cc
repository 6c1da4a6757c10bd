#include "nn/optim/lr_scheduler.h"

#include <cmath>

#include "base/error.h"

namespace trainrun {
namespace optim {

LRScheduler::LRScheduler(Optimizer& o) : optimizer_(o) {
  // Like PyTorch, the first scheduler on an optimizer records each group's
  // lr as "initial_lr"; later ones (chained in SequentialLR) start from it
  // rather than from whatever the first one has set.
  for (auto& g : o.param_groups()) base_lrs_.push_back(g.options.emplace("initial_lr", g.options.at("lr")).first->second);
}

void LRScheduler::apply(int64_t epoch) {
  auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options["lr"] = lr_at(g, epoch);
}

void LRScheduler::step() { apply(++epoch_); }

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (auto& g : optimizer_.param_groups()) out.push_back(g.options.at("lr"));
  return out;
}

StepLR::StepLR(Optimizer& o, int64_t step_size_, double gamma_) : LRScheduler(o), step_size(step_size_), gamma(gamma_) {
  TR_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, got {}", step_size);
}
double StepLR::lr_at(size_t g, int64_t epoch) const {
  return base_lrs_[g] * std::pow(gamma, static_cast<double>(epoch / step_size));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& o, int64_t t_max_, double eta_min_)
    : LRScheduler(o), t_max(t_max_), eta_min(eta_min_) {
  TR_CHECK(t_max > 0, ValueError, "CosineAnnealingLR: T_max must be positive, got {}", t_max);
}
double CosineAnnealingLR::lr_at(size_t g, int64_t epoch) const {
  return eta_min + (base_lrs_[g] - eta_min) * (1 + std::cos(M_PI * static_cast<double>(epoch) / t_max)) / 2;
}

LinearLR::LinearLR(Optimizer& o, double s, double e, int64_t n)
    : LRScheduler(o), start_factor(s), end_factor(e), total_iters(n) {
  TR_CHECK(s > 0 && s <= 1 && e >= 0 && e <= 1 && n > 0, ValueError,
           "LinearLR: need 0 < start_factor <= 1, 0 <= end_factor <= 1, total_iters > 0 (got {}, {}, {})", s, e, n);
  apply(0);
}
double LinearLR::lr_at(size_t g, int64_t epoch) const {
  double t = static_cast<double>(std::min(epoch, total_iters)) / total_iters;
  return base_lrs_[g] * (start_factor + (end_factor - start_factor) * t);
}

LambdaLR::LambdaLR(Optimizer& o, std::function<double(int64_t)> f) : LRScheduler(o), factor(std::move(f)) { apply(0); }
double LambdaLR::lr_at(size_t g, int64_t epoch) const { return base_lrs_[g] * factor(epoch); }

SequentialLR::SequentialLR(Optimizer& o, std::vector<std::shared_ptr<LRScheduler>> s, std::vector<int64_t> m)
    : LRScheduler(o), schedulers_(std::move(s)), milestones_(std::move(m)) {
  TR_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(), ValueError,
           "SequentialLR: {} schedulers need {} milestones, got {}", schedulers_.size(),
           schedulers_.empty() ? 0 : schedulers_.size() - 1, milestones_.size());
  apply(0);
}
double SequentialLR::lr_at(size_t g, int64_t epoch) const {
  size_t i = 0;
  int64_t start = 0;
  while (i < milestones_.size() && epoch >= milestones_[i]) start = milestones_[i++];
  return schedulers_[i]->lr_at(g, epoch - start);
}

}  // namespace optim
}  // namespace trainrun
