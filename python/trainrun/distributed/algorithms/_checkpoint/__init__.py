"""torch.distributed.algorithms._checkpoint: activation checkpointing as a module wrapper."""

from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (checkpoint_wrapper as an attribute, imported when first read)
