"""torch._functorch.config: AOTAutograd's settings, at PyTorch's defaults, readable and patchable
(`config.patch(...)`). trainrun's joint recording (compile/joint_graph.h) reads none of them: it always saves
what the backward reads and recomputes cheap pointwise results instead (compile/recompute.h)."""
import sys as _sys

from trainrun._config_patch import patcher as _patcher

activation_memory_budget = 1.0
activation_memory_budget_runtime_estimator = "flops"
ban_recompute_reductions = True
ban_recompute_not_in_allowlist = True
functionalize_rng_ops = False
fake_tensor_allow_meta = True
donated_buffer = True
view_replay_for_aliased_outputs = True
debug_assert = False
cse = True

patch = _patcher(_sys.modules[__name__])
