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

// Like torch.inference_mode: no recording, and tensors made inside it can
// never join a graph later (they are marked and rejected by autograd).
class InferenceMode {
 public:
  InferenceMode();
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;
  static bool is_enabled();

 private:
  bool saved_grad_, saved_inference_;
};

}  // namespace trainrun
