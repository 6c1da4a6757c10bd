"""checkpoint(module): the composable activation checkpointing of torch.distributed._composable. The module
stays itself (its names, state dict keys and type unchanged); each call of its forward saves only its inputs
and recomputes the rest in backward, as trainrun.utils.checkpoint(..., use_reentrant=False) does (so it also
works under fully_shard, which puts the gathered parameters back for the recomputation)."""
import functools


def checkpoint(module, *, use_reentrant=False, **kwargs):
    if use_reentrant:
        raise NotImplementedError("checkpoint(module, use_reentrant=True): the composable API recomputes with "
                                  "the non-reentrant checkpoint only (as PyTorch's)")
    if getattr(module, "_composable_checkpoint", False):
        return module
    from trainrun.utils.checkpoint import checkpoint as checkpoint_call
    forward = module.forward

    @functools.wraps(forward)
    def recomputing_forward(*args, **call_kwargs):
        return checkpoint_call(forward, *args, use_reentrant=False, **kwargs, **call_kwargs)

    module.forward = recomputing_forward
    module._composable_checkpoint = True
    return module
