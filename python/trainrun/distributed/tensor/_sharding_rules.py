"""Sharding propagation: for an op on DTensors, each mesh dimension picks,
from the op's candidate strategies (placements each input must have, and the
output's), the one whose redistribution costs least; the inputs are
redistributed, the op runs on the pieces, and the result carries the
strategy's output placements. An op without a rule raises NotImplementedError
naming the op and the placements: never a silent wrong answer.

Rules: pointwise ops (Partial kept where the op is linear in it),
matmul/mm/bmm/linear (sharding the contracted dim gives Partial), sum/mean/
amax/amin (over a sharded dim gives Partial), softmax/log_softmax,
transpose/permute/t/view/reshape (where the sharded dim survives)."""
from trainrun import _C
from trainrun.distributed.tensor import _redistribute
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec
from trainrun.distributed.tensor.placement_types import Partial, Replicate, Shard

# Communication weight of one mesh dim's change (per element of the local piece): what the choice minimizes.
_STEP_COST = {"all_gather": 2.0, "all_reduce": 2.0, "reduce_scatter": 1.0, "all_to_all": 1.0, "chunk": 0.0,
              "partition": 0.0}


def _cost(current, required):
    if current == required:
        return 0.0
    if current.is_shard() and required.is_shard():
        return _STEP_COST["all_to_all"]
    if current.is_shard():
        return _STEP_COST["all_gather"] + (0.0 if required.is_replicate() else 1.0)
    if current.is_partial():
        return _STEP_COST["reduce_scatter"] if required.is_shard() else _STEP_COST["all_reduce"]
    return 0.0  # Replicate -> Shard / Partial: local


def _choose(op, strategies_per_mesh_dim, inputs):
    """Per mesh dim, the cheapest (required placements per input, output placement)."""
    chosen_inputs = [[] for _ in inputs]
    chosen_output = []
    for i, strategies in enumerate(strategies_per_mesh_dim):
        if not strategies:
            raise NotImplementedError(
                f"DTensor: no sharding strategy for {op} on placements "
                f"{[list(x.placements) for x in inputs]} (mesh dim {i})")
        # Global sizes, not local ones: every rank must make the same choice (pieces may differ in size).
        best = min(strategies, key=lambda s: sum(_cost(x.placements[i], r) * x.numel()
                                                  for x, r in zip(inputs, s[0])))
        for k, r in enumerate(best[0]):
            chosen_inputs[k].append(r)
        chosen_output.append(best[1])
    return chosen_inputs, chosen_output


def _to(x, placements):
    return x.redistribute(placements=placements) if tuple(placements) != x.placements else x


def _local_inputs(inputs, required, out):
    """The inputs' pieces in the required placements, each wrapped so that its gradient is summed over the
    mesh dims where it is replicated but the output is not (there each rank computes a share of it)."""
    pieces = []
    for x, req in zip(inputs, required):
        local = _to(x, req).to_local()
        dims = tuple(i for i, (r, o) in enumerate(zip(req, out)) if r.is_replicate() and not o.is_replicate())
        if dims and local.requires_grad:
            local = _redistribute.SumGradientOver.apply(local, x.device_mesh, dims)
        pieces.append(local)
    return pieces


def _mesh_of(dtensors, op):
    mesh = dtensors[0].device_mesh
    for d in dtensors[1:]:
        if d.device_mesh != mesh:
            raise ValueError(f"DTensor: {op} got DTensors on different meshes")
    return mesh


# ---- pointwise ------------------------------------------------------------------------------------------
LINEAR_UNARY = {"neg", "clone", "detach", "contiguous", "float", "double", "half", "bfloat16", "to", "scale"}
# How an op treats Partial operands: "sum" (linear in every operand: add, sub), "one" (linear in each operand
# separately: mul), "first" (linear in the first only: div), or none.
PARTIAL_RULE = {"add": "sum", "sub": "sum", "mul": "one", "div": "first"}


def _out_shape(shapes):
    import numpy as np
    return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))


def pointwise(op, fn, args, scalar_args=()):
    """An elementwise op over DTensor operands (and Python numbers in scalar_args positions)."""
    dts = [a for a in args if isinstance(a, DTensor)]
    mesh = _mesh_of(dts, op)
    out_shape = _out_shape([d.shape for d in dts])
    out_ndim = len(out_shape)
    has_scalar = any(not isinstance(a, DTensor) for a in args)
    partial_rule = "sum" if op in LINEAR_UNARY else PARTIAL_RULE.get(op)
    if partial_rule == "sum" and has_scalar and op in ("add", "sub"):
        partial_rule = None  # a number added on every rank would be counted n times
    strategies = []
    for i in range(mesh.ndim):
        options = []
        for k, src in enumerate(dts):
            p = src.placements[i]
            if isinstance(p, Shard):
                od = p.dim + out_ndim - src.ndim
                req = []
                for x in dts:
                    d = od - (out_ndim - x.ndim)
                    req.append(Shard(d) if d >= 0 and x.shape[d] == out_shape[od] else Replicate())
                options.append((req, Shard(od)))
            elif isinstance(p, Partial) and p.reduce_op in ("sum", "avg") and partial_rule:
                if partial_rule == "sum":
                    options.append(([p for _ in dts], p))
                elif partial_rule == "one" or (partial_rule == "first" and src is dts[0] and
                                                isinstance(args[0], DTensor)):
                    options.append(([p if x is src else Replicate() for x in dts], p))
        options.append(([Replicate() for _ in dts], Replicate()))
        strategies.append(options)
    required, out = _choose(op, strategies, dts)
    converted = iter(_local_inputs(dts, required, out))
    local_args = [next(converted) if isinstance(a, DTensor) else a for a in args]
    result = fn(*local_args)
    return DTensor(result, DTensorSpec(mesh, out, out_shape))


# ---- matmul -----------------------------------------------------------------------------------------------
def matmul(op, a, b):
    """a @ b for a of >= 1 dims and b of 1 or 2 dims, or both of the same >= 3 dims (batched)."""
    if not isinstance(a, DTensor) or not isinstance(b, DTensor):
        raise TypeError(f"DTensor: {op} needs both operands as DTensors (use DTensor.from_local/distribute_tensor)")
    mesh = _mesh_of([a, b], op)
    if b.ndim == 1 or a.ndim == 1:
        raise NotImplementedError(f"DTensor: {op} with a 1-D operand has no sharding rule yet")
    batched = b.ndim > 2
    if batched and a.ndim != b.ndim:
        raise NotImplementedError(f"DTensor: {op} of {a.ndim}-D by {b.ndim}-D operands has no sharding rule")
    out_shape = tuple(a.shape[:-1]) + (b.shape[-1],)
    out_ndim = len(out_shape)
    m, k_a, k_b, n_b = a.ndim - 2, a.ndim - 1, b.ndim - 2, b.ndim - 1
    strategies = []
    for i in range(mesh.ndim):
        options = [([Replicate(), Replicate()], Replicate()),
                   ([Shard(m), Replicate()], Shard(m)),
                   ([Replicate(), Shard(n_b)], Shard(out_ndim - 1)),
                   ([Shard(k_a), Shard(k_b)], Partial()),
                   ([Partial(), Replicate()], Partial()),
                   ([Replicate(), Partial()], Partial())]
        for d in range(a.ndim - 2):  # batch (or leading) dims of a
            if batched:
                options.append(([Shard(d), Shard(d)], Shard(d)))
            else:
                options.append(([Shard(d), Replicate()], Shard(d)))
        strategies.append(options)
    required, out = _choose(op, strategies, [a, b])
    la, lb = _local_inputs([a, b], required, out)
    return DTensor(_C.matmul(la, lb), DTensorSpec(mesh, out, out_shape))


def linear(x, weight, bias=None):
    out = matmul("linear", x, transpose(weight, 0, 1))
    return pointwise("add", lambda a, b: a + b, [out, bias]) if bias is not None else out


# ---- reductions ---------------------------------------------------------------------------------------------
def reduction(op, fn, x, dims, keepdim, partial_op):
    """sum/mean/amax/amin over dims (None: all): a sharded reduced dim gives Partial(partial_op)."""
    mesh = x.device_mesh
    dims = list(range(x.ndim)) if dims is None or dims == [] else [d % x.ndim for d in dims]
    kept = [d for d in range(x.ndim) if d not in dims]
    out_shape = tuple(1 if d in dims else s for d, s in enumerate(x.shape)) if keepdim else \
        tuple(x.shape[d] for d in kept)
    strategies = []
    for i in range(mesh.ndim):
        p = x.placements[i]
        options = [([Replicate()], Replicate())]
        if isinstance(p, Shard):
            if p.dim in dims:  # (not for max/min: a Partial max would send the gradient to every rank's
                if partial_op == "sum":  # local maximum, not only to the global one)
                    options.append(([p], Partial(partial_op)))
            else:
                options.append(([p], Shard(p.dim if keepdim else kept.index(p.dim))))
        elif isinstance(p, Partial) and p.reduce_op == partial_op == "sum":
            options.append(([p], p))
        strategies.append(options)
    required, out = _choose(op, strategies, [x])
    return DTensor(fn(_local_inputs([x], required, out)[0], dims), DTensorSpec(mesh, out, out_shape))


# ---- softmax-like: the reduced dim must be whole ---------------------------------------------------------------
def along_whole_dim(op, fn, x, dim):
    d = dim % x.ndim
    strategies = []
    for i in range(x.device_mesh.ndim):
        p = x.placements[i]
        options = [([Replicate()], Replicate())]
        if isinstance(p, Shard) and p.dim != d:
            options.append(([p], p))
        strategies.append(options)
    required, out = _choose(op, strategies, [x])
    return DTensor(fn(_local_inputs([x], required, out)[0]), DTensorSpec(x.device_mesh, out, tuple(x.shape)))


# ---- views -------------------------------------------------------------------------------------------------------
def permute(x, dims):
    dims = [d % x.ndim for d in dims]
    out = [Shard(dims.index(p.dim)) if isinstance(p, Shard) else p for p in x.placements]
    return DTensor(x.to_local().permute(dims), DTensorSpec(x.device_mesh, out, tuple(x.shape[d] for d in dims)))


def transpose(x, d0, d1):
    order = list(range(x.ndim))
    d0, d1 = d0 % x.ndim, d1 % x.ndim
    order[d0], order[d1] = order[d1], order[d0]
    return permute(x, order)


def reshape(op, x, shape):
    """A reshape keeps a sharded dim when it survives whole: same size and same product of the dims before it."""
    shape = list(shape)
    total = x.numel()
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape[shape.index(-1)] = total // known if known else 0
    out = []
    for p in x.placements:
        if isinstance(p, Shard):
            before = 1
            for s in x.shape[:p.dim]:
                before *= s
            target, acc = None, 1
            for j, s in enumerate(shape):
                if acc == before and s == x.shape[p.dim]:
                    target = j
                    break
                acc *= s
            if target is None:
                raise NotImplementedError(f"DTensor: {op} from {list(x.shape)} to {shape} splits or merges the "
                                          f"sharded dim {p.dim} (placements {list(x.placements)}); redistribute "
                                          "first")
            out.append(Shard(target))
        else:
            out.append(p)
    local_shape, _ = _redistribute.local_shape(tuple(shape), x.device_mesh, out)
    local = getattr(x.to_local(), op)(local_shape)
    return DTensor(local, DTensorSpec(x.device_mesh, out, tuple(shape)))

