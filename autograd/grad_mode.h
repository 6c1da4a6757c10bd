#pragma once
// Whether ops record the graph, per thread (torch.no_grad / enable_grad /
// inference_mode). Backward runs its formulas with grad mode off unless
// create_graph is set.
namespace trainrun {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Scoped grad mode: NoGradGuard turns recording off, EnableGradGuard on.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : saved_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(saved_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool saved_;
};

struct NoGradGuard : AutoGradMode {
  NoGradGuard() : AutoGradMode(false) {}
};
struct EnableGradGuard : AutoGradMode {
  EnableGradGuard() : AutoGradMode(true) {}
};

// torch.inference_mode's scope: no recording, is_enabled() tells code inside
// that it may skip training-only work, and tensors allocated inside are
// inference tensors (StorageImpl::is_inference). InferenceMode(false) is
// torch.inference_mode(False): the mode off (grad mode as it was).
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true);
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;
  static bool is_enabled();
  // The mode alone (grad mode untouched): for Python's context manager, which pairs it with no_grad.
  static void set_enabled(bool enabled);

 private:
  bool saved_grad_, saved_inference_;
};

}  // namespace trainrun
