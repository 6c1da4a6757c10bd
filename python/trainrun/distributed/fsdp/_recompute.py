"""Activation checkpointing under fully_shard: a checkpointed function that ran with a module's gathered
parameters (in forward, between the gather and the reshard) is run again in backward, when the module holds
its shards. This puts the very tensors the forward read back in the modules' slots around that
recomputation (their storage is gathered again by then: RegatherBeforeBackward runs first), so the
recomputation computes with full parameters and its gradients reach the gather's node, which reduce-scatters
them as usual. Registered with trainrun.utils.checkpoint's RECOMPUTE_CONTEXTS."""
import contextlib

from trainrun import _C
from trainrun.distributed.tensor._module_views import VIEWS_OFF, views_off
from trainrun.utils import checkpoint as _checkpoint


@contextlib.contextmanager
def _installed(slots):
    saved = []
    for module, name, tensor in slots:
        current = dict(_C.nn.Module._named_local_parameters(module, "", False, True)).get(name)
        saved.append((module, name, current, module.__dict__.get(VIEWS_OFF, False)))
        module._replace_parameter(name, tensor)
        views_off(module, True)
    try:
        yield
    finally:
        for module, name, current, off in reversed(saved):
            module._replace_parameter(name, current)
            views_off(module, off)


def gathered_parameters(modules):
    """At a checkpoint's forward: the parameters in place in the modules fully_shard has gathered (None when
    none is), as a context for the recomputation."""
    slots, seen = [], set()
    for root in modules:
        for module in root.modules():
            if id(module) in seen or not module.__dict__.get(VIEWS_OFF):
                continue
            seen.add(id(module))
            slots += [(module, name, tensor)
                      for name, tensor in _C.nn.Module._named_local_parameters(module, "", False, True)]
    return _installed(slots) if slots else None


if gathered_parameters not in _checkpoint.RECOMPUTE_CONTEXTS:
    _checkpoint.RECOMPUTE_CONTEXTS.append(gathered_parameters)
