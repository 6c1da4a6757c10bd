"""PyTorch's activation-checkpoint wrappers (torch.distributed.algorithms._checkpoint.checkpoint_wrapper), as
FSDP training scripts use them:

    apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper,
                                   check_fn=lambda m: isinstance(m, TransformerBlock))

Each module check_fn picks is replaced, in its parent, by a CheckpointWrapper whose forward runs it under
trainrun.utils.checkpoint.checkpoint (its activations recomputed in backward). The wrapper is invisible to
state dicts and parameter names: keys read as the wrapped module's (PyTorch strips the
"_checkpoint_wrapped_module." prefix the same way), so checkpoints load with or without it. offload_wrapper
keeps the saved activations in CPU memory instead (autograd.graph.save_on_cpu)."""
import enum
import functools

from trainrun.autograd.graph import save_on_cpu
from trainrun.nn._module_wrapper import ModuleWrapper
from trainrun.utils.checkpoint import checkpoint

_CHECKPOINT_WRAPPED_MODULE = "_checkpoint_wrapped_module"

__all__ = ["CheckpointImpl", "CheckpointWrapper", "OffloadWrapper", "checkpoint_wrapper", "offload_wrapper",
           "apply_activation_checkpointing"]


class CheckpointImpl(enum.Enum):
    REENTRANT = enum.auto()
    NO_REENTRANT = enum.auto()


class ActivationWrapper(ModuleWrapper):
    """The wrapped module under _checkpoint_wrapped_module; names and state dict keys without that prefix."""

    _child_name = _CHECKPOINT_WRAPPED_MODULE

    def __init__(self, mod):
        super().__init__()
        self._wrap(mod)


class CheckpointWrapper(ActivationWrapper):
    def __init__(self, mod, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None, **checkpoint_fn_kwargs):
        super().__init__(mod)
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            self.checkpoint_fn = functools.partial(
                checkpoint, use_reentrant=checkpoint_impl == CheckpointImpl.REENTRANT, **checkpoint_fn_kwargs)
        else:
            self.checkpoint_fn = functools.partial(checkpoint_fn, **checkpoint_fn_kwargs)

    def forward(self, *args, **kwargs):
        return self.checkpoint_fn(self._checkpoint_wrapped_module, *args, **kwargs)


class OffloadWrapper(ActivationWrapper):
    def forward(self, *args, **kwargs):
        with save_on_cpu(pin_memory=True):
            return self._checkpoint_wrapped_module(*args, **kwargs)


def checkpoint_wrapper(module, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None,
                       **checkpoint_fn_kwargs):
    """module, its forward run under activation checkpointing."""
    return CheckpointWrapper(module, checkpoint_impl, checkpoint_fn, **checkpoint_fn_kwargs)


def offload_wrapper(module):
    """module, its saved activations kept in CPU memory until backward."""
    return OffloadWrapper(module)


def apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda _: True,
                                   auto_wrap_policy=None):
    """Wraps, in place, every submodule of model for which check_fn is True (the outermost ones: a wrapped
    module's children are not visited again)."""
    if auto_wrap_policy is not None:
        raise NotImplementedError("apply_activation_checkpointing(auto_wrap_policy=...) is not supported; "
                                  "pass check_fn")

    def visit(parent):
        for name, child in list(parent.named_children()):
            if isinstance(child, ActivationWrapper):
                continue
            if check_fn(child):
                setattr(parent, name, checkpoint_wrapper_fn(child))
            else:
                visit(child)
    visit(model)
    return model
