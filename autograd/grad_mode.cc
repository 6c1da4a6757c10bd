#include "autograd/grad_mode.h"

#include "base/error.h"
#include "tensor/dispatcher.h"
#include "tensor/storage.h"

namespace trainrun {
namespace {
thread_local bool t_grad_enabled = true;
thread_local bool t_inference = false;
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

InferenceMode::InferenceMode(bool enabled) : saved_grad_(t_grad_enabled), saved_inference_(t_inference) {
  if (enabled) t_grad_enabled = false;
  t_inference = enabled;
  set_allocating_inference_tensors(enabled);
}
InferenceMode::~InferenceMode() {
  t_grad_enabled = saved_grad_;
  t_inference = saved_inference_;
  set_allocating_inference_tensors(saved_inference_);
}
bool InferenceMode::is_enabled() { return t_inference; }
void InferenceMode::set_enabled(bool enabled) {
  t_inference = enabled;
  set_allocating_inference_tensors(enabled);
}

namespace {
// An op without a backward formula must not hand back a result that
// silently drops out of the graph.
void refuse_missing_formula(const std::string& op, bool floating_result) {
  if (!t_grad_enabled || !floating_result) return;
  throw NotImplementedError(fmt::format(
      "{}: no backward formula is registered for this op and an input requires grad; run it under NoGradGuard "
      "or on detach()ed inputs",
      op));
}
struct InstallHook {
  InstallHook() { missing_formula_hook() = &refuse_missing_formula; }
} install_hook;
}  // namespace

}  // namespace trainrun
