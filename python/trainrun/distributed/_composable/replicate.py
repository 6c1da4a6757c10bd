"""torch.distributed._composable.replicate: data parallelism applied to a module in place (the module keeps its
class and is called as itself), as DistributedDataParallel does it. replicate(module) makes the module's
parameters rank 0's and, from then on, averages their gradients over the ranks during every backward (buckets
all-reduced as they fill), and broadcasts rank 0's buffers before each training forward."""
from trainrun.nn.parallel import DistributedDataParallel


class _ReplicateState:
    """What replicate keeps on a module: the DistributedDataParallel whose reducer syncs its gradients."""

    def __init__(self, ddp):
        self._ddp = ddp


def replicate(module, device_id=None, *, device_ids=None, process_group=None, device_mesh=None, **ddp_kwargs):
    """module, its gradients synced over process_group (or the 1-D device_mesh; default: the world) from now on.
    ddp_kwargs are DistributedDataParallel's (bucket_cap_mb, broadcast_buffers, find_unused_parameters,
    gradient_as_bucket_view, ...). Replicating a module twice is refused."""
    from trainrun.nn import Module
    if not isinstance(module, Module):
        raise TypeError(f"replicate(): expected an nn.Module, got {type(module).__name__}")
    if replicate.state(module) is not None:
        raise RuntimeError("replicate(): the module is already replicated")
    if device_id is not None and device_ids is None:
        device_ids = [device_id]
    ddp = DistributedDataParallel(module, device_ids=device_ids, process_group=process_group,
                                  device_mesh=device_mesh, **ddp_kwargs)
    module.__dict__["_replicate_state"] = _ReplicateState(ddp)  # (not a submodule: the module keeps its tree)
    if ddp._broadcast_buffers:
        module.register_forward_pre_hook(_broadcast_buffers)
    return module


def _broadcast_buffers(module, args):
    """Rank 0's buffers on every rank before a training forward, as DistributedDataParallel's forward does."""
    from trainrun import distributed as dist
    from trainrun._autograd import no_grad
    if not module.training:
        return None
    ddp = module.__dict__["_replicate_state"]._ddp
    with no_grad():
        for _, buffer in module.named_buffers():
            dist.broadcast(buffer, group=ddp._process_group, group_src=0)
    return None


def _state(module):
    """The module's replicate state (None when it is not replicated)."""
    return module.__dict__.get("_replicate_state")


replicate.state = _state
