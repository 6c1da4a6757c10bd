#include "autograd/saved_variable.h"

#include "autograd/grad_mode.h"
#include "autograd/variable.h"

namespace trainrun {

SavedVariable::SavedVariable(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  saved_ = true;
  is_output_ = is_output;
  // Inputs keep their graph (double backward needs it); outputs are detached
  // to break the cycle output -> grad_fn -> saved output.
  data_ = is_output ? detach(t) : t;
  version_ = t.impl()->version();
}

Tensor SavedVariable::unpack(const std::shared_ptr<Node>& owner) const {
  if (!saved_) return Tensor();
  const std::string node = owner->name();
  // RuntimeError, as PyTorch's (scripts catch that): the graph is spent or stale, not an argument wrong.
  TR_CHECK(!released_, Error,
           "{}: trying to backward through the graph a second time (its saved tensors were freed); pass "
           "retain_graph=true to the first backward",
           node);
  TR_CHECK(data_.impl()->version() == version_, Error,
           "{}: a tensor of shape {} saved for backward was modified in place (version {} now, {} when saved); "
           "make a copy before modifying it",
           node, data_.shape_str(), data_.impl()->version(), version_);
  if (is_output_ && GradMode::is_enabled()) {
    Tensor attached = detach(data_);
    set_history(attached, owner, output_nr_);
    return attached;
  }
  return data_;
}

void SavedVariable::reset() {
  if (!saved_) return;
  data_ = Tensor();
  released_ = true;
}

}  // namespace trainrun
