"""Moving a DTensor's local pieces between placements, one mesh dimension at
a time, with the collective each step needs:

    Shard -> Replicate      all_gather (uneven shards padded, then trimmed)
    Partial -> Replicate    all_reduce
    Partial -> Shard        reduce_scatter
    Replicate -> Shard      a local chunk (no communication)
    Shard(i) -> Shard(j)    all_to_all
    Replicate -> Partial    division (sum) or nothing (avg, max, min)

Steps that undo sharding run from the innermost mesh dim out, steps that add
it from the outermost in, so a tensor dim sharded on several mesh dims
(nested) is rebuilt and re-split consistently. A plan (the list of steps) is
cached per (shape, source, target, coordinate). Every collective goes
through `communicate`, which CommDebugMode counts."""
import functools

from trainrun import _C
from trainrun import distributed as dist
from trainrun.autograd import Function
from trainrun.distributed.tensor.placement_types import Partial, Replicate, Shard, _StridedShard, chunk_sizes, \
    nesting_order

_COUNTERS = []  # active CommDebugModes


def communicate(kind, fn, *args, **kwargs):
    for mode in _COUNTERS:
        mode.record(kind)
    return fn(*args, **kwargs)


_REDUCE_OPS = {"sum": "SUM", "avg": "AVG", "max": "MAX", "min": "MIN"}


def _reduce_op(partial):
    return getattr(dist.ReduceOp, _REDUCE_OPS[partial.reduce_op])


def all_reduced(t, group, how="sum"):
    """A copy of t summed (or maxed) over the ranks of group; t itself is left alone."""
    t = t.contiguous().clone()
    op = dist.ReduceOp.MAX if how == "max" else dist.ReduceOp.SUM
    communicate("all_reduce", dist.all_reduce, t, op=op, group=group)
    return t


def reducer_over(mesh, mesh_dim):
    """reduce(t, "sum" | "max") over the ranks of mesh_dim: what clip_grad_norm_ calls to combine the gradient
    norms of a parameter's shards (nn.utils.register_sharded_parameter)."""
    group = mesh._group(mesh_dim)
    return lambda t, how: all_reduced(t, group, how)


def local_shape(global_shape, mesh, placements, coordinate=None):
    """The shape of this rank's piece, and its offset in the global tensor."""
    shape, offset = list(global_shape), [0] * len(global_shape)
    coordinate = mesh.get_coordinate() if coordinate is None else coordinate
    for i in nesting_order(placements):
        p = placements[i]
        if isinstance(p, Shard):
            n, c = mesh.size(i), coordinate[i]
            sizes = chunk_sizes(shape[p.dim], n)
            offset[p.dim] += sum(sizes[:c])
            shape[p.dim] = sizes[c]
    return shape, offset


def _piece_size(global_shape, mesh, placements, dim, mesh_dim, coordinate):
    """The size of tensor dim `dim` that mesh dim `mesh_dim` splits: what the outer mesh dims leave of it."""
    size = global_shape[dim]
    for i in range(mesh_dim):
        p = placements[i]
        if isinstance(p, Shard) and p.dim == dim:
            size = chunk_sizes(size, mesh.size(i))[coordinate[i]]
    return size


@functools.lru_cache(maxsize=4096)
def _plan(global_shape, mesh, src, dst, coordinate):
    """The steps from src to dst placements: (mesh dim, kind, arguments)."""
    ndim = len(src)
    cur = list(src)
    steps = []

    def nested_change(i):
        p = cur[i]
        if not isinstance(p, Shard):
            return False
        return any((isinstance(src[k], Shard) and src[k].dim == p.dim or isinstance(dst[k], Shard) and
                    dst[k].dim == p.dim) and src[k] != dst[k] for k in range(i))

    # 1. Undo what differs, innermost mesh dim first.
    for i in reversed(range(ndim)):
        if cur[i] == dst[i] and not nested_change(i):
            continue
        p, q = cur[i], dst[i]
        if isinstance(p, Shard):
            others_shard = any(isinstance(cur[k], Shard) and cur[k].dim in (p.dim, getattr(q, "dim", None))
                               for k in range(ndim) if k != i) or \
                any(isinstance(dst[k], Shard) and dst[k].dim in (p.dim, getattr(q, "dim", None))
                    for k in range(ndim) if k != i)
            if isinstance(q, Shard) and q.dim != p.dim and not others_shard:
                steps.append((i, "all_to_all", (p.dim, q.dim)))
                cur[i] = q
            else:
                steps.append((i, "all_gather", (p.dim,)))
                cur[i] = Replicate()
        elif isinstance(p, Partial):
            if isinstance(q, Shard) and not any(isinstance(cur[k], Shard) and cur[k].dim == q.dim
                                                for k in range(ndim) if k != i) and \
                    not any(isinstance(dst[k], Shard) and dst[k].dim == q.dim for k in range(ndim) if k != i):
                steps.append((i, "reduce_scatter", (q.dim, p)))
                cur[i] = q
            elif isinstance(q, Partial):  # another reduce op: through Replicate
                steps.append((i, "all_reduce", (p,)))
                cur[i] = Replicate()
            else:
                steps.append((i, "all_reduce", (p,)))
                cur[i] = Replicate()
    # 2. Add what dst has, outermost mesh dim first.
    for i in range(ndim):
        if cur[i] == dst[i]:
            continue
        q = dst[i]
        if isinstance(q, Shard):
            steps.append((i, "chunk", (q.dim,)))
        elif isinstance(q, Partial):
            steps.append((i, "partition", (q,)))
        cur[i] = q
    return tuple(steps)


def _apply(local, global_shape, mesh, steps, src):
    cur = list(src)
    coordinate = mesh.get_coordinate()
    for i, kind, args in steps:
        group, n, me = mesh._group(i), mesh.size(i), coordinate[i]
        if kind == "all_gather":
            (d,) = args
            sizes = chunk_sizes(_piece_size(global_shape, mesh, cur, d, i, coordinate), n)
            local = _all_gather(local, d, sizes, group)
            cur[i] = Replicate()
        elif kind == "all_to_all":
            d, j = args
            d_sizes = chunk_sizes(_piece_size(global_shape, mesh, cur, d, i, coordinate), n)
            j_sizes = chunk_sizes(_piece_size(global_shape, mesh, cur, j, i, coordinate), n)
            local = _all_to_all(local, d, j, d_sizes, j_sizes, me, group)
            cur[i] = Shard(j)
        elif kind == "reduce_scatter":
            j, partial = args
            sizes = chunk_sizes(_piece_size(global_shape, mesh, cur, j, i, coordinate), n)
            local = _reduce_scatter(local, j, sizes, me, partial, group)
            cur[i] = Shard(j)
        elif kind == "all_reduce":
            (partial,) = args
            local = local.contiguous().clone()
            communicate("all_reduce", dist.all_reduce, local, op=_reduce_op(partial), group=group)
            cur[i] = Replicate()
        elif kind == "chunk":
            (d,) = args
            sizes = chunk_sizes(local.shape[d], n)
            local = local.narrow(d, sum(sizes[:me]), sizes[me]).contiguous()
            cur[i] = Shard(d)
        elif kind == "partition":
            (partial,) = args
            local = local / n if partial.reduce_op == "sum" else local.clone()
            cur[i] = partial
    return local


def _all_gather(local, d, sizes, group):
    step = max(sizes)
    piece = local.movedim(d, 0).contiguous()
    if piece.shape[0] < step:  # uneven: pad to the largest piece, trim after
        pad = _C.zeros([step - piece.shape[0]] + list(piece.shape[1:]), dtype=piece.dtype, device=piece.device)
        piece = _C.cat([piece, pad], 0)
    gathered = [_C.empty(list(piece.shape), dtype=piece.dtype, device=piece.device) for _ in sizes]
    communicate("all_gather", dist.all_gather, gathered, piece, group=group)
    whole = _C.cat([g.narrow(0, 0, s) for g, s in zip(gathered, sizes)], 0)
    return whole.movedim(0, d).contiguous()


def _all_to_all(local, d, j, d_sizes, j_sizes, me, group):
    """One all_to_all_single: chunk r of dim j goes to rank r; the pieces that come back are this rank's
    chunk of dim j from every rank, joined along dim d. Even chunks go as a strided view (dim j split as
    (n, J/n), n brought to the front): between the ranks of one host the backend copies each chunk straight
    into shared memory, so this costs what a plain all_to_all_single of the same bytes does."""
    offsets = [sum(j_sizes[:r]) for r in range(len(j_sizes))]
    n = len(j_sizes)
    send_splits = None
    if len(set(j_sizes)) == 1:
        split = list(local.shape[:j]) + [n, j_sizes[0]] + list(local.shape[j + 1:])
        send = local.reshape(split).movedim(j, 0)  # a view: row r is rank r's chunk
        send_splits = [1] * n
    else:
        send = _C.cat([local.narrow(j, o, s).reshape([-1]) for o, s in zip(offsets, j_sizes)], 0)
    rest = [s for k, s in enumerate(local.shape) if k not in (d, j)]
    per_row = 1
    for s in rest:
        per_row *= s
    receive_sizes = [d_r * j_sizes[me] * per_row for d_r in d_sizes]
    send_sizes = [local.shape[d] * s * per_row for s in j_sizes]
    received = _C.empty([sum(receive_sizes)], dtype=local.dtype, device=local.device)
    communicate("all_to_all", dist.all_to_all_single, received, send, receive_sizes,
                send_splits if send_splits is not None else send_sizes, group=group)
    shape = list(local.shape)
    shape[j] = j_sizes[me]
    if d == 0:  # the pieces, one after the other, already are the result
        shape[0] = sum(d_sizes)
        return received.view(shape)
    pieces, start = [], 0
    for d_r, n in zip(d_sizes, receive_sizes):
        piece_shape = list(shape)
        piece_shape[d] = d_r
        pieces.append(received.narrow(0, start, n).view(piece_shape))
        start += n
    return _C.cat(pieces, d)


def _reduce_scatter(local, j, sizes, me, partial, group):
    step = max(sizes)
    full = local.movedim(j, 0).contiguous()
    total = step * len(sizes)
    if full.shape[0] < total:
        pad = _C.zeros([total - full.shape[0]] + list(full.shape[1:]), dtype=full.dtype, device=full.device)
        full = _C.cat([full, pad], 0)
    # Piece r of the reduce-scatter input must be the rows rank r keeps: place each chunk at r * step.
    pieces, offset = [], 0
    for s in sizes:
        part = full.narrow(0, offset, s)
        if s < step:
            part = _C.cat([part, _C.zeros([step - s] + list(full.shape[1:]), dtype=full.dtype,
                                          device=full.device)], 0)
        pieces.append(part)
        offset += s
    out = _C.empty([step] + list(full.shape[1:]), dtype=full.dtype, device=full.device)
    communicate("reduce_scatter", dist.reduce_scatter_tensor, out, _C.cat(pieces, 0).contiguous(),
                op=_reduce_op(partial), group=group)
    return out.narrow(0, 0, sizes[me]).movedim(0, j).contiguous()


def redistribute_local(local, global_shape, mesh, src, dst):
    """This rank's piece for placements dst, given its piece for src (no autograd)."""
    if tuple(src) == tuple(dst):
        return local
    src, dst = list(src), list(dst)
    coordinate = tuple(mesh.get_coordinate())
    for i in [i for i, p in enumerate(src) if isinstance(p, _StridedShard)]:  # innermost splits: undone first
        p, src[i] = src[i], Replicate()
        piece = local_shape(global_shape, mesh, src, coordinate)[0][p.dim]
        local = _all_gather(local, p.dim, chunk_sizes(piece, mesh.size(i)), mesh._group(i))
    strided = [i for i, p in enumerate(dst) if isinstance(p, _StridedShard)]
    plain_dst = [Replicate() if i in strided else p for i, p in enumerate(dst)]
    if src != plain_dst:
        steps = _plan(tuple(global_shape), mesh, tuple(src), tuple(plain_dst), coordinate)
        local = _apply(local, list(global_shape), mesh, steps, src)
    for i in strided:  # then split what the plain shards left, on this rank (no communication)
        d, n, me = dst[i].dim, mesh.size(i), coordinate[i]
        sizes = chunk_sizes(local.shape[d], n)
        local = local.narrow(d, sum(sizes[:me]), sizes[me]).contiguous()
    return local


def gradient_placements(placements):
    """Where a gradient flows back to: Partial sources receive a replicated gradient."""
    return tuple(Replicate() if p.is_partial() else p for p in placements)


class Redistribute(Function):
    """redistribute_local with autograd: the gradient goes back from dst to src (Partial -> Replicate)."""

    @staticmethod
    def forward(ctx, local, global_shape, mesh, src, dst):
        ctx.args = (global_shape, mesh, src, dst)
        return redistribute_local(local, global_shape, mesh, src, dst)

    @staticmethod
    def backward(ctx, grad):
        global_shape, mesh, src, dst = ctx.args
        # The gradient of the output is replicated where the output was Partial (each term's gradient is
        # the whole gradient), so it returns from dst's gradient placements to src's.
        back = redistribute_local(grad, global_shape, mesh, gradient_placements(dst), gradient_placements(src))
        return back, None, None, None, None


class SumGradientOver(Function):
    """Identity forward; backward sums the gradient over the given mesh dims. An op whose input is replicated
    on a mesh dim where its output is sharded or partial computes, on each rank, only that rank's share of
    the input's gradient: the shares add up to it (Megatron's "f" operator)."""

    @staticmethod
    def forward(ctx, local, mesh, mesh_dims):
        ctx.args = (mesh, mesh_dims)
        return local.clone()

    @staticmethod
    def backward(ctx, grad):
        mesh, mesh_dims = ctx.args
        for i in mesh_dims:
            if mesh.size(i) > 1:
                grad = all_reduced(grad, mesh._group(i))
        return grad, None, None
