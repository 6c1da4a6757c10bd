"""torch.distributed.tensor.experimental: implicit_replication, local_map, context_parallel (_attention.py) and
register_sharding (_register_sharding.py: how a custom op runs on DTensors)."""
import contextlib
import functools

from trainrun.distributed.tensor import _implicit


@contextlib.contextmanager
def implicit_replication():
    """Inside it, a plain tensor combined with a DTensor counts as replicated on the DTensor's mesh (every
    rank holds the whole of it), as PyTorch's: `dtensor + bias` with a plain bias."""
    previous = _implicit._STATE["on"]
    _implicit._STATE["on"] = True
    try:
        yield
    finally:
        _implicit._STATE["on"] = previous


def local_map(func=None, out_placements=None, in_placements=None, in_grad_placements=None, device_mesh=None, *,
              redistribute_inputs=False):
    """func written for local tensors, called on DTensors: each DTensor argument becomes its local piece
    (in in_placements: redistributed there when redistribute_inputs, else it must already be), and each
    output (a tensor, or a tuple/list of them) becomes a DTensor with out_placements (one per output for
    several outputs; None leaves that output local). Without func, a decorator (PyTorch's two forms).
    in_grad_placements is accepted: the inputs' gradients come back in their own placements here."""
    if func is None:
        return lambda fn: local_map(fn, out_placements, in_placements, in_grad_placements, device_mesh,
                                    redistribute_inputs=redistribute_inputs)
    from trainrun.distributed.tensor._dtensor import DTensor
    from trainrun.distributed.tensor.placement_types import normalize

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        mesh = device_mesh
        local_args = []
        for i, a in enumerate(args):
            if isinstance(a, DTensor):
                mesh = mesh or a.device_mesh
                wanted = None if in_placements is None else in_placements[i]
                if wanted is not None:
                    wanted = normalize(wanted, a.ndim)
                    if tuple(a.placements) != wanted:
                        if not redistribute_inputs:
                            raise ValueError(f"local_map: argument {i} has placements {list(a.placements)} but "
                                             f"in_placements gives {list(wanted)} (pass redistribute_inputs=True)")
                        a = a.redistribute(a.device_mesh, wanted)
                local_args.append(a.to_local())
            else:
                local_args.append(a)
        out = func(*local_args, **kwargs)
        if mesh is None:
            return out  # no DTensor argument and no mesh: nothing to wrap (PyTorch's behaviour)
        several = isinstance(out, (tuple, list))
        outs = list(out) if several else [out]
        specs = out_placements if several else [out_placements]
        wrapped_outs = [o if spec is None or not hasattr(o, "shape") else DTensor.from_local(o, mesh, spec)
                        for o, spec in zip(outs, specs)]
        return type(out)(wrapped_outs) if several else wrapped_outs[0]
    return wrapped


from trainrun.distributed.tensor.experimental._attention import context_parallel  # noqa: E402
from trainrun.distributed.tensor.experimental._register_sharding import register_sharding  # noqa: E402

__all__ = ["context_parallel", "implicit_replication", "local_map", "register_sharding"]


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
