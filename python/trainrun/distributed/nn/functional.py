"""torch.distributed.nn.functional: collectives with gradients. Each forward is the collective; each backward
is its adjoint over the same group: all_gather's is a sum reduce-scatter of the gradients (every rank's use of a
piece flows back to the rank it came from), all_reduce(SUM)'s an all-reduce of the gradient, broadcast's a sum
reduce to the source, scatter's a gather, all_to_all's the exchange reversed. So a loss computed from gathered
embeddings (contrastive learning) gives each rank the gradient of its own embeddings. Every call is a collective:
all ranks of the group call it, in the same order."""
from trainrun import _C
from trainrun import distributed as dist
from trainrun.autograd import Function


def _empty_like(t):
    return _C.empty(list(t.shape), dtype=t.dtype, device=t.device)


def _zeros_like(t):
    return _C.zeros(list(t.shape), dtype=t.dtype, device=t.device)


class _AllGather(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        pieces = [_empty_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(pieces, tensor.contiguous(), group=group)
        return tuple(pieces)

    @staticmethod
    def backward(ctx, *grads):
        grads = [g.contiguous() if g is not None else None for g in grads]
        like = next(g for g in grads if g is not None)
        grads = [g if g is not None else _zeros_like(like) for g in grads]
        mine = _empty_like(grads[0])
        dist.reduce_scatter(mine, grads, op=dist.ReduceOp.SUM, group=ctx.group)
        return None, mine


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        if op not in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
            raise NotImplementedError(f"distributed.nn.functional.all_reduce: op {op} has no gradient here (SUM "
                                      "and AVG do)")
        ctx.op, ctx.group = op, group
        out = tensor.clone().contiguous()
        dist.all_reduce(out, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.clone().contiguous()
        dist.all_reduce(out, op=ctx.op, group=ctx.group)
        return None, None, out


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, group, tensor):
        ctx.src, ctx.group = src, group
        out = tensor.clone().contiguous()
        dist.broadcast(out, src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        total = grad.clone().contiguous()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=ctx.group)
        return None, None, total if dist.get_rank() == ctx.src else _zeros_like(total)


class _Reduce(Function):
    @staticmethod
    def forward(ctx, dst, op, group, tensor):
        if op != dist.ReduceOp.SUM:
            raise NotImplementedError("distributed.nn.functional.reduce: only op=SUM has a gradient here")
        ctx.dst, ctx.group = dst, group
        out = tensor.clone().contiguous()
        dist.reduce(out, dst, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.clone().contiguous()
        dist.broadcast(out, ctx.dst, group=ctx.group)
        return None, None, None, out


class _Scatter(Function):
    @staticmethod
    def forward(ctx, src, group, *tensors):
        ctx.src, ctx.group = src, group
        out = _empty_like(tensors[0])
        dist.scatter(out, [t.contiguous() for t in tensors] if dist.get_rank() == src else None, src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        pieces = [_empty_like(grad) for _ in range(dist.get_world_size(ctx.group))]
        dist.all_gather(pieces, grad.contiguous(), group=ctx.group)
        if dist.get_rank() != ctx.src:
            pieces = [_zeros_like(p) for p in pieces]
        return (None, None) + tuple(pieces)


class _Gather(Function):
    @staticmethod
    def forward(ctx, dst, group, tensor):
        ctx.dst, ctx.group = dst, group
        pieces = [_empty_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(pieces, tensor.contiguous(), group=group)  # (every rank receives; only dst's are kept)
        if dist.get_rank() != dst:
            pieces = [_zeros_like(p) for p in pieces]
        return tuple(pieces)

    @staticmethod
    def backward(ctx, *grads):
        like = next(g for g in grads if g is not None)
        grads = [(g if g is not None else _zeros_like(like)).contiguous() for g in grads]
        mine = _empty_like(grads[0])
        dist.scatter(mine, grads if dist.get_rank() == ctx.dst else None, ctx.dst, group=ctx.group)
        return None, None, mine


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, op, group, *inputs):
        if op != dist.ReduceOp.SUM:
            raise NotImplementedError("distributed.nn.functional.reduce_scatter: only op=SUM has a gradient here")
        ctx.group = group
        out = _empty_like(inputs[0])
        dist.reduce_scatter(out, [t.contiguous() for t in inputs], op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        pieces = [_empty_like(grad) for _ in range(dist.get_world_size(ctx.group))]
        dist.all_gather(pieces, grad.contiguous(), group=ctx.group)
        return (None, None) + tuple(pieces)


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, group, *inputs):
        ctx.group = group
        ctx.shapes = [list(t.shape) for t in inputs]
        outputs = [_empty_like(t) for t in inputs]
        dist.all_to_all(outputs, [t.contiguous() for t in inputs], group=group)
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        grads = [g.contiguous() for g in grads]
        back = [_C.empty(shape, dtype=grads[0].dtype, device=grads[0].device) for shape in ctx.shapes]
        dist.all_to_all(back, grads, group=ctx.group)
        return (None,) + tuple(back)


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, group, output_split_sizes, input_split_sizes, tensor, output_shape):
        ctx.group, ctx.splits, ctx.input_shape = group, (output_split_sizes, input_split_sizes), list(tensor.shape)
        out = _C.empty(output_shape, dtype=tensor.dtype, device=tensor.device)
        dist.all_to_all_single(out, tensor.contiguous(), output_split_sizes, input_split_sizes, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        output_splits, input_splits = ctx.splits
        back = _C.empty(ctx.input_shape, dtype=grad.dtype, device=grad.device)
        dist.all_to_all_single(back, grad.contiguous(), input_splits, output_splits, group=ctx.group)
        return None, None, None, back, None


def _world(group):
    return group if group is not None else dist.group.WORLD


def broadcast(tensor, src, group=None):
    """tensor from src on every rank; gradients sum back to src."""
    return _Broadcast.apply(src, _world(group), tensor)


def gather(tensor, dst=0, group=None):
    """Every rank's tensor, on dst (zeros elsewhere); dst's gradients flow back to each rank."""
    return _Gather.apply(dst, _world(group), tensor)


def scatter(tensors, src=0, group=None):
    """src's tensors[rank] on each rank; gradients are gathered back to src."""
    return _Scatter.apply(src, _world(group), *tensors)


def reduce(tensor, dst, op=None, group=None):
    """The sum over ranks, on dst; dst's gradient is every rank's."""
    return _Reduce.apply(dst, op if op is not None else dist.ReduceOp.SUM, _world(group), tensor)


def reduce_scatter(output, input_list, op=None, group=None):
    """This rank's piece of the sum of every rank's input_list (output: its shape, as PyTorch's signature)."""
    return _ReduceScatter.apply(op if op is not None else dist.ReduceOp.SUM, _world(group), *input_list)


def all_gather(tensor, group=None):
    """A tuple of every rank's tensor (rank order); gradients sum back to the rank each piece came from."""
    return _AllGather.apply(_world(group), tensor)


def all_to_all(output_tensor_list, input_tensor_list, group=None):
    """Rank i's input_tensor_list[j] goes to rank j's output j... as dist.all_to_all; returns the received tuple."""
    return _AllToAll.apply(_world(group), *input_tensor_list)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None):  # noqa: A002
    """dist.all_to_all_single with gradients (the exchange reversed); output gives the result's shape."""
    return _AllToAllSingle.apply(_world(group), output_split_sizes, input_split_sizes, input, list(output.shape))


def all_reduce(tensor, op=None, group=None):
    """The reduction (SUM or AVG) over ranks, on every rank; the gradient is reduced the same way."""
    return _AllReduce.apply(op if op is not None else dist.ReduceOp.SUM, _world(group), tensor)
