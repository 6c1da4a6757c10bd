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
  version_ = t.impl()->version();
  if (auto hooks = current_saved_tensor_hooks()) {
    TR_CHECK(hooks->disabled_message.empty(), Error, "{}", hooks->disabled_message);
    hooks_ = hooks;
    counter_ = t.impl()->version_counter();
    shape_ = t.shape_str();
    packed_ = hooks->pack(is_output ? detach(t) : t);
    return;
  }
  data_ = is_output ? detach(t) : t;
}

namespace {

// A saved tensor whose storage was shrunk since (fully_shard frees gathered parameters with resize_(0) once their
// backward is done) must not reach a kernel: it would read memory that is gone.
void check_memory(const Tensor& t, const std::string& node) {
  if (!t.defined() || t.numel() == 0 || t.device().is_meta()) return;
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const size_t needed = static_cast<size_t>(last + 1) * t.element_size();
  const size_t has = t.impl()->storage()->nbytes();
  TR_CHECK(has >= needed, Error,
           "{}: a tensor of shape {} saved for backward has no memory any more (its storage holds {} bytes, {} "
           "needed): it was freed after the forward (fully_shard frees gathered parameters once their backward "
           "ran; backward through the same graph twice is not possible there)",
           node, t.shape_str(), has, needed);
}

}  // namespace

Tensor SavedVariable::unpack(const std::shared_ptr<Node>& owner) const {
  if (!saved_) return Tensor();
  const std::string node = owner->name();
  // RuntimeError, as PyTorch's (scripts catch that): the graph is spent or stale, not an argument wrong.
  TR_CHECK(!released_, Error,
           "Trying to backward through the graph a second time (or directly access saved tensors after they have "
           "already been freed): {}'s saved tensors were freed by the first backward; pass retain_graph=True to "
           "the first backward",
           node);
  // (a packed tensor whose counter is gone can no longer be written: its version stands)
  const auto counter = counter_.lock();
  const uint64_t now = hooks_ ? (counter ? *counter : version_) : data_.impl()->version();
  TR_CHECK(now == version_, Error,
           "one of the variables needed for gradient computation has been modified by an inplace operation: a "
           "tensor of shape {} saved by {} is at version {}; expected version {} instead (it was modified in "
           "place after being saved: make a copy before modifying it)",
           hooks_ ? shape_ : data_.shape_str(), node, now, version_);
  Tensor data = data_;
  if (hooks_) {
    data = hooks_->unpack(packed_);
    TR_CHECK(data.defined(), TypeError, "{}: the saved_tensors_hooks unpack hook returned no tensor", node);
  }
  check_memory(data, node);
  if (is_output_ && GradMode::is_enabled()) {
    Tensor attached = detach(data);
    set_history(attached, owner, output_nr_);
    return attached;
  }
  return data;
}

void SavedVariable::reset() {
  if (!saved_) return;
  data_ = Tensor();
  packed_.reset();
  hooks_.reset();
  released_ = true;
}

}  // namespace trainrun
