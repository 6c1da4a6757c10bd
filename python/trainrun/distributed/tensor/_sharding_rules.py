"""Sharding propagation: for an op on DTensors, each mesh dimension picks,
from the op's candidate strategies (placements each input must have, and the
output's), the one whose redistribution costs least; the inputs are
redistributed, the op runs on the pieces, and the result carries the
strategy's output placements. The decision is cached per op signature (op,
input specs, arguments that matter), so a repeated call only looks it up. An op without a rule raises NotImplementedError
naming the op and the placements: never a silent wrong answer.

Rules: pointwise ops (Partial kept where the op is linear in it),
matmul/mm/bmm/linear (sharding the contracted dim gives Partial), sum/mean/
amax/amin (over a sharded dim gives Partial), softmax/log_softmax,
transpose/permute/t/view/reshape (where the sharded dim survives)."""
from trainrun import _C
from trainrun.distributed.tensor import _redistribute
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec
from trainrun.distributed.tensor._implicit import replicated_like
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


class _Plan:
    """A cached decision for one op signature: the placements each input must be in, the output's spec, and
    the mesh dims over which each input's gradient is summed."""
    __slots__ = ("required", "keep", "grad_dims", "out")

    def __init__(self, inputs, required, out_placements, out_shape):
        self.required = [tuple(r) for r in required]
        self.keep = [x.placements == r for x, r in zip(inputs, self.required)]
        self.grad_dims = [tuple(i for i, (r, o) in enumerate(zip(req, out_placements))
                                if r.is_replicate() and not o.is_replicate()) for req in self.required]
        self.out = DTensorSpec(inputs[0].device_mesh, out_placements, out_shape)

    def pieces(self, inputs):
        out = []
        for x, keep, req, dims in zip(inputs, self.keep, self.required, self.grad_dims):
            local = x._local_tensor if keep else x.redistribute(placements=req)._local_tensor
            if dims and local.requires_grad:
                local = _redistribute.SumGradientOver.apply(local, x.device_mesh, dims)
            out.append(local)
        return out


_PLANS = {}  # op signature -> _Plan (bounded: cleared when it grows past _MAX_PLANS)
_MAX_PLANS = 4096


def _plan(key, inputs, decide):
    """The plan for `key`, made by decide() -> (required placements per input, out placements, out shape)."""
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _Plan(inputs, *decide())
    return plan


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


def pointwise(op, fn, args):
    """An elementwise op over DTensor operands and Python numbers."""
    dts = [a for a in args if isinstance(a, DTensor)]
    key = (op, tuple(d._spec for d in dts), tuple(isinstance(a, DTensor) for a in args))
    plan = _plan(key, dts, lambda: _decide_pointwise(op, args, dts))
    pieces = iter(plan.pieces(dts))
    result = fn(*[next(pieces) if isinstance(a, DTensor) else a for a in args])
    return DTensor(result, plan.out)


def _decide_pointwise(op, args, dts):
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
    return required, out, out_shape


# ---- matmul -----------------------------------------------------------------------------------------------
def matmul(op, a, b):
    """a @ b for a of >= 2 dims and b of 2 dims, or both of the same >= 3 dims (batched)."""
    a, b = replicated_like(a, b), replicated_like(b, a)  # (under experimental.implicit_replication)
    if not isinstance(a, DTensor) or not isinstance(b, DTensor):
        raise TypeError(f"DTensor: {op} needs both operands as DTensors (use DTensor.from_local/distribute_tensor)")
    plan = _plan((op, a._spec, b._spec), [a, b], lambda: _decide_matmul(op, a, b))
    la, lb = plan.pieces([a, b])
    return DTensor(_C.matmul(la, lb), plan.out)


def _decide_matmul(op, a, b):
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
    for _ in range(mesh.ndim):
        options = [([Replicate(), Replicate()], Replicate()),
                   ([Shard(m), Replicate()], Shard(m)),
                   ([Replicate(), Shard(n_b)], Shard(out_ndim - 1)),
                   ([Shard(k_a), Shard(k_b)], Partial()),
                   ([Partial(), Replicate()], Partial()),
                   ([Replicate(), Partial()], Partial())]
        for d in range(a.ndim - 2):  # batch (or leading) dims of a
            options.append(([Shard(d), Shard(d)], Shard(d)) if batched else ([Shard(d), Replicate()], Shard(d)))
        strategies.append(options)
    required, out = _choose(op, strategies, [a, b])
    return required, out, out_shape


def linear(x, weight, bias=None):
    x, weight = replicated_like(x, weight), replicated_like(weight, x)  # (under experimental.implicit_replication)
    for name, value in (("input", x), ("weight", weight)):
        if not isinstance(value, DTensor):  # (a module never distributed, called on a DTensor: PyTorch refuses it too)
            raise TypeError(f"DTensor: linear mixes a DTensor with a {type(value).__name__} {name}; distribute the "
                            "module (parallelize_module, distribute_module) or convert it with distribute_tensor")
    out = matmul("linear", x, transpose(weight, 0, 1))
    return pointwise("add", lambda a, b: a + b, [out, bias]) if bias is not None else out


# ---- reductions ---------------------------------------------------------------------------------------------
def reduction(op, fn, x, dims, keepdim, partial_op):
    """sum/mean/amax/amin over dims (None: all): a sharded reduced dim gives Partial (sum only)."""
    dims = tuple(range(x.ndim)) if not dims else tuple(d % x.ndim for d in dims)
    plan = _plan((op, x._spec, dims, keepdim), [x], lambda: _decide_reduction(op, x, dims, keepdim, partial_op))
    return DTensor(fn(plan.pieces([x])[0], list(dims)), plan.out)


def _decide_reduction(op, x, dims, keepdim, partial_op):
    kept = [d for d in range(x.ndim) if d not in dims]
    out_shape = tuple(1 if d in dims else s for d, s in enumerate(x.shape)) if keepdim else \
        tuple(x.shape[d] for d in kept)
    strategies = []
    for i in range(x.device_mesh.ndim):
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
    return required, out, out_shape


# ---- softmax-like: the reduced dim must be whole ---------------------------------------------------------------
def along_whole_dim(op, fn, x, dim):
    d = dim % x.ndim
    plan = _plan((op, x._spec, d), [x], lambda: _decide_whole_dim(op, x, d))
    return DTensor(fn(plan.pieces([x])[0]), plan.out)


def _decide_whole_dim(op, x, d):
    strategies = []
    for i in range(x.device_mesh.ndim):
        p = x.placements[i]
        options = [([Replicate()], Replicate())]
        if isinstance(p, Shard) and p.dim != d:
            options.append(([p], p))
        strategies.append(options)
    required, out = _choose(op, strategies, [x])
    return required, out, tuple(x.shape)


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
    """A reshape keeps a sharded dim when it survives whole (same size and same product of the dims before
    it), or when it leads a merge of dims or leads a split of itself with its even pieces kept whole: then
    each rank's piece is still one block of the new dim. Otherwise that mesh dim is replicated first (the
    result is a new tensor then, not a view of x's pieces)."""
    shape = list(shape)
    total = x.numel()
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape[shape.index(-1)] = total // known if known else 0
    out = []
    for i, p in enumerate(x.placements):
        if isinstance(p, Shard):
            before = 1
            for s in x.shape[:p.dim]:
                before *= s
            size, n = x.shape[p.dim], x.device_mesh.size(i)
            target, acc = None, 1
            for j, s in enumerate(shape):
                if acc == before and (s == size or (s > size and s % size == 0 and size % n == 0) or
                                      (0 < s < size and size % s == 0 and s % n == 0)):
                    target = j
                    break
                acc *= s
            if target is None:  # (the sharded dim is split or merged unevenly: gathered first, as PyTorch's)
                whole = [Replicate() if k == i else q for k, q in enumerate(x.placements)]
                return reshape(op, x.redistribute(x.device_mesh, whole), shape)
            out.append(Shard(target))
        else:
            out.append(p)
    local_shape, _ = _redistribute.local_shape(tuple(shape), x.device_mesh, out)
    local = getattr(x.to_local(), op)(local_shape)
    return DTensor(local, DTensorSpec(x.device_mesh, out, tuple(shape)))


def concat(op, fn, tensors, dim):
    """cat/stack of DTensors along dim: a mesh dim on which every input is sharded alike along another tensor
    dim (or is the same Partial) stays so; anything else is replicated first."""
    tensors = list(tensors)
    _mesh_of(tensors, op)
    key = (op, tuple(t._spec for t in tensors), dim)
    plan = _plan(key, tensors, lambda: _decide_concat(op, tensors, dim))
    return DTensor(fn(plan.pieces(tensors), dim), plan.out)


def _decide_concat(op, tensors, dim):
    stack = op == "stack"
    ndim = tensors[0].ndim
    d = dim % (ndim + 1 if stack else ndim)
    shape = list(tensors[0].shape)
    if stack:
        shape.insert(d, len(tensors))
    else:
        shape[d] = sum(t.shape[d] for t in tensors)
    strategies = []
    for i in range(tensors[0].device_mesh.ndim):
        options = [([Replicate()] * len(tensors), Replicate())]
        first = tensors[0].placements[i]
        if all(t.placements[i] == first for t in tensors):
            if isinstance(first, Shard) and (stack or first.dim != d):
                options.append(([first] * len(tensors), Shard(first.dim + (1 if stack and first.dim >= d else 0))))
            elif isinstance(first, Partial) and first.reduce_op in ("sum", "avg"):
                options.append(([first] * len(tensors), first))
        strategies.append(options)
    required, out = _choose(op, strategies, tensors)
    return required, out, tuple(shape)


# ---- normalization, embedding, loss -----------------------------------------------------------------------
def normalized(op, fn, x, params, n_dims):
    """layer_norm/rms_norm over the last n_dims: those must be whole on every rank; weight and bias are
    replicated (their gradients summed where the input is sharded)."""
    inputs = [x] + list(params)
    key = (op, tuple(d._spec for d in inputs), n_dims)
    plan = _plan(key, inputs, lambda: _decide_normalized(op, x, params, n_dims))
    return DTensor(fn(*plan.pieces(inputs)), plan.out)


def _decide_normalized(op, x, params, n_dims):
    first = x.ndim - n_dims
    strategies = []
    for i in range(x.device_mesh.ndim):
        p = x.placements[i]
        options = [([Replicate()] * (1 + len(params)), Replicate())]
        if isinstance(p, Shard) and p.dim < first:
            options.append(([p] + [Replicate()] * len(params), p))
        strategies.append(options)
    required, out = _choose(op, strategies, [x] + list(params))
    return required, out, tuple(x.shape)


def embedding(indices, weight):
    """Rows of weight at indices: indices sharded on a dim give the output sharded there; weight sharded on
    the embedding dim gives the output sharded on its last dim; a vocabulary-sharded weight is gathered."""
    plan = _plan(("embedding", indices._spec, weight._spec), [indices, weight],
                 lambda: _decide_embedding(indices, weight))
    idx, w = plan.pieces([indices, weight])
    return DTensor(_C.embedding(idx, w), plan.out)


def _decide_embedding(indices, weight):
    out_shape = tuple(indices.shape) + (weight.shape[1],)
    strategies = []
    for i in range(indices.device_mesh.ndim):
        options = [([Replicate(), Replicate()], Replicate()),
                   ([Replicate(), Shard(1)], Shard(indices.ndim))]
        options += [([Shard(d), Replicate()], Shard(d)) for d in range(indices.ndim)]
        strategies.append(options)
    required, out = _choose("embedding", strategies, [indices, weight])
    return required, out, out_shape


def cross_entropy(logits, target, reduction="mean", ignore_index=-100):
    """Cross-entropy of class logits sharded along the batch (or replicated): each rank's rows give a Partial
    sum (divided by the global count for "mean"); class-sharded logits need loss_parallel()."""
    from trainrun.distributed.tensor._redistribute import local_shape
    if reduction not in ("mean", "sum"):
        raise NotImplementedError(f"DTensor cross_entropy(reduction={reduction!r}): only 'mean' and 'sum'")
    if logits.ndim != 2:
        raise NotImplementedError("DTensor cross_entropy: logits must be (batch, classes)")
    if any(p.is_shard(1) for p in logits.placements):
        raise NotImplementedError("DTensor cross_entropy: logits sharded on the class dim need "
                                  "trainrun.distributed.tensor.parallel.loss_parallel()")
    x = logits.redistribute(placements=[p if p.is_shard(0) else Replicate() for p in logits.placements])
    tgt = target.full_tensor() if isinstance(target, DTensor) else target
    rows, offset = local_shape(x.shape, x.device_mesh, x.placements)
    local_target = tgt.narrow(0, offset[0], rows[0])
    local = x.to_local()
    total = _C.nn.cross_entropy(local, local_target, ignore_index=ignore_index, reduction="sum")
    sharded = any(p.is_shard(0) for p in x.placements)
    if reduction == "mean":
        count = int((tgt != ignore_index).sum().item())
        total = total / max(count, 1)
    placements = [Partial() if p.is_shard(0) else Replicate() for p in x.placements]
    if not sharded:
        placements = [Replicate()] * x.device_mesh.ndim
    return DTensor(total, DTensorSpec(x.device_mesh, placements, ()))
