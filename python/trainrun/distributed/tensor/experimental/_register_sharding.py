"""register_sharding, as torch.distributed.tensor.experimental.register_sharding: how a custom op runs on
DTensors. The rule gets the op's arguments (a DTensor as its spec: shape, ndim, dtype, placements, mesh) and
returns the acceptable shardings, each (output placements, input placements): one placement per output and one
per argument (None for a non-tensor), for one mesh dim; on a mesh of several dims every combination of them is
a candidate. The candidate needing the least data moved from the inputs' current placements wins (ties: the
first listed); the inputs are redistributed to it, the op runs on the local pieces (autograd included), and the
outputs become DTensors with its output placements, their global shapes from the op's fake (register_fake) or,
without one, from the pieces' sizes across the mesh."""
import itertools

from trainrun.distributed.tensor.placement_types import Replicate, Shard

_RULES = {}


def register_sharding(op):
    """Decorator: `@register_sharding(torch.ops.ns.my_op)` over rule(*args, **kwargs) -> [(outs, ins), ...]."""
    def wrapper(rule):
        _RULES[_qualname(op)] = rule
        return rule
    return wrapper


def _qualname(op):
    name = getattr(op, "_qualname", None)
    if name is None:
        text = str(op)  # (a torch.ops packet, "ns.name", or its .default overload)
        name = text[:-len(".default")] if text.endswith(".default") else text
        name = name.replace(".", "::", 1)
    return name


class ArgSpec:
    """What a rule sees of a DTensor argument."""

    def __init__(self, dtensor):
        self.shape, self.ndim, self.dtype = tuple(dtensor.shape), dtensor.ndim, dtensor.dtype
        self.placements, self.mesh = tuple(dtensor.placements), dtensor.device_mesh

    def __repr__(self):
        return f"ArgSpec(shape={list(self.shape)}, placements={list(self.placements)})"


def _moved_bytes(dtensor, wanted):
    """A rough price of redistributing: the elements of the inputs whose placement changes, per mesh dim."""
    return sum(dtensor.numel() for have, want in zip(dtensor.placements, wanted) if have != want)


def run_with_sharding(op, args, kwargs):
    from trainrun.distributed.tensor._dtensor import DTensor
    name = op._qualname
    rule = _RULES.get(name)
    if rule is None:
        raise RuntimeError(f"Operator {name.replace('::', '.')}.default does not have a sharding strategy "
                           "registered (register one with torch.distributed.tensor.experimental.register_sharding)")
    values = list(args) + list(kwargs.values())
    dtensors = [v for v in values if isinstance(v, DTensor)]
    mesh = dtensors[0].device_mesh
    specs = [ArgSpec(v) if isinstance(v, DTensor) else v for v in values]
    strategies = rule(*specs[:len(args)], **dict(zip(kwargs, specs[len(args):])))
    if not strategies:
        raise RuntimeError(f"{name}: the registered sharding rule returned no acceptable sharding")
    best = None
    for combo in itertools.product(strategies, repeat=mesh.ndim):  # one strategy per mesh dim
        outs = [[c[0][i] for c in combo] for i in range(len(combo[0][0]))]
        ins = [[c[1][i] for c in combo] for i in range(len(values))]
        cost = sum(_moved_bytes(v, want) for v, want in zip(values, ins)
                   if isinstance(v, DTensor) and want[0] is not None)
        if best is None or cost < best[0]:
            best = (cost, outs, ins)
    _, outs, ins = best
    local = []
    for v, want in zip(values, ins):
        if isinstance(v, DTensor):
            if want[0] is not None and tuple(v.placements) != tuple(want):
                v = v.redistribute(mesh, want)
            v = v.to_local()
        local.append(v)
    result = op(*local[:len(args)], **dict(zip(kwargs, local[len(args):])))
    several = isinstance(result, (tuple, list))
    results = list(result) if several else [result]
    shapes = _global_shapes(op, values, results, outs, mesh, args, kwargs)
    wrapped = [DTensor.from_local(r, mesh, placements, shape=shape)
               for r, placements, shape in zip(results, outs, shapes)]
    return type(result)(wrapped) if several else wrapped[0]


def _global_shapes(op, values, results, outs, mesh, args, kwargs):
    """The outputs' global shapes: the op's fake run on meta tensors of the inputs' global shapes, or else the
    pieces' sizes summed over each mesh dim that shards them."""
    import trainrun
    from trainrun.distributed.tensor._dtensor import DTensor
    if getattr(op, "_fake", None) is not None:
        meta = [trainrun.empty(list(v.shape), dtype=v.dtype, device="meta") if isinstance(v, DTensor) else v
                for v in values]
        fake = op(*meta[:len(args)], **dict(zip(kwargs, meta[len(args):])))
        return [list(f.shape) for f in (fake if isinstance(fake, (tuple, list)) else [fake])]
    shapes = []
    for r, placements in zip(results, outs):
        shape = list(r.shape)
        for mesh_dim, p in enumerate(placements):
            if isinstance(p, Shard):
                from trainrun import distributed as dist
                size = trainrun.tensor([float(shape[p.dim])], device=r.device)
                dist.all_reduce(size, group=mesh.get_group(mesh_dim))
                shape[p.dim] = int(size.item())
        shapes.append(shape)
    return shapes


__all__ = ["register_sharding", "Replicate", "Shard"]
