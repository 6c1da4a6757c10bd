#pragma once
// Optimizers hold parameter groups (each with its own options, e.g. lr) and
// per-parameter state; step() updates the parameters in place from their
// .grad, outside the graph. state_dict()/load_state_dict() round-trip both,
// keyed by the parameter's position (as PyTorch's are).
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {
namespace optim {

using Options = std::map<std::string, double>;

struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

struct OptimizerState {
  std::vector<std::map<std::string, Tensor>> state;  // per parameter, in group order
  std::vector<Options> groups;
};

class Optimizer {
 public:
  // Options missing from a group are filled from defaults.
  Optimizer(std::vector<ParamGroup> groups, Options defaults, std::string name);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  void add_param_group(ParamGroup group);

  OptimizerState state_dict() const;
  // Throws ValueError when the group or parameter counts differ.
  void load_state_dict(const OptimizerState& state);

 protected:
  // State of parameter i of group g (created empty on first use).
  std::map<std::string, Tensor>& state_of(size_t group, size_t index);
  double option(const ParamGroup& g, const char* name) const;

  std::string name_;
  Options defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<std::map<std::string, Tensor>>> state_;
};

}  // namespace optim
}  // namespace trainrun
