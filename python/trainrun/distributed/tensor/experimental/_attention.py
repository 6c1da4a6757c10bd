"""Context parallelism (torch.distributed.tensor.experimental.context_parallel): a long sequence split over the
ranks of a mesh. Inside the context the given buffers (inputs, labels, position tables) hold this rank's part of
the sequence, and F.scaled_dot_product_attention attends this rank's queries to the whole sequence's keys and
values, gathered from every rank ("allgather" rotation). PyTorch's layout: with load balancing (the default), the
sequence is cut into 2 * world chunks and rank r holds chunks r and 2 * world - 1 - r, so each rank has as much
causal work as the others; without it, rank r holds chunk r. The causal mask follows the global positions.

The gather's backward is a sum reduce-scatter: every rank's queries send their key/value gradients back to the
rank that holds those positions. Gradients of the model's parameters then differ per rank (each saw its own
tokens): average them over the context-parallel group (DDP or FSDP over it does), with the loss a mean over each
rank's tokens, to get the whole sequence's gradient."""
import contextlib

from trainrun import _C
from trainrun import distributed as dist
from trainrun.autograd import Function


class _ContextParallelOptions:
    enable_load_balance = True
    rotate_method = "allgather"


_cp_options = _ContextParallelOptions()


def _layout(world):
    """The global chunk index at each position of a rank-major concatenation of every rank's part."""
    if _cp_options.enable_load_balance:
        return [c for r in range(world) for c in (r, 2 * world - 1 - r)]
    return list(range(world))


def _chunks_of(rank, world):
    return [rank, 2 * world - 1 - rank] if _cp_options.enable_load_balance else [rank]


def _shard(buffer, mesh, dim):
    world, rank = mesh.size(), mesh.get_local_rank()
    pieces = 2 * world if _cp_options.enable_load_balance else world
    if buffer.shape[dim] % pieces:
        raise ValueError(f"context_parallel: a buffer's sequence dim {dim} has {buffer.shape[dim]} positions, not a "
                         f"multiple of {pieces} (the {'2 * ' if pieces != world else ''}{world} ranks' chunks)")
    chunks = buffer.chunk(pieces, dim)
    return _C.cat([chunks[c] for c in _chunks_of(rank, world)], dim)


def _in_global_order(gathered, world, dim):
    """A rank-major concatenation of every rank's part, put back in sequence order."""
    layout = _layout(world)
    pieces = gathered.chunk(len(layout), dim)
    position = {chunk: i for i, chunk in enumerate(layout)}
    return _C.cat([pieces[position[c]] for c in range(len(layout))], dim)


class _GatherSequence(Function):
    """All-gather along dim (rank-major); the backward reduce-scatters (sums) the gradient back."""

    @staticmethod
    def forward(ctx, group, dim, tensor):
        ctx.group, ctx.dim = group, dim
        n = dist.get_world_size(group)
        x = tensor.movedim(dim, 0).contiguous()
        out = _C.empty([n * x.shape[0]] + list(x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x, group=group)
        return out.movedim(0, dim).contiguous()

    @staticmethod
    def backward(ctx, grad):
        n = dist.get_world_size(ctx.group)
        g = grad.movedim(ctx.dim, 0).contiguous()
        out = _C.empty([g.shape[0] // n] + list(g.shape[1:]), dtype=g.dtype, device=g.device)
        dist.reduce_scatter_tensor(out, g, op=dist.ReduceOp.SUM, group=ctx.group)
        return None, None, out.movedim(0, ctx.dim).contiguous()


def _context_parallel_sdpa(original, mesh):
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                     enable_gqa=False):
        if attn_mask is not None:
            raise NotImplementedError("context parallel scaled_dot_product_attention: attn_mask is not supported "
                                      "(is_causal is)")
        group, world, rank = mesh.get_group(), mesh.size(), mesh.get_local_rank()
        seq = query.ndim - 2
        keys = _in_global_order(_GatherSequence.apply(group, seq, key), world, seq)
        values = _in_global_order(_GatherSequence.apply(group, seq, value), world, seq)
        kwargs = {"dropout_p": dropout_p, "scale": scale, "enable_gqa": enable_gqa}
        if not is_causal:
            return original(query, keys, values, **kwargs)
        chunk = query.shape[seq] // len(_chunks_of(rank, world))
        rows = _C.cat([_C.arange(c * chunk, (c + 1) * chunk, dtype=_C.dtype.int64) for c in _chunks_of(rank, world)],
                      0)
        columns = _C.arange(keys.shape[seq], dtype=_C.dtype.int64)
        allowed = columns.reshape([1, -1]) <= rows.reshape([-1, 1])  # (True: attend, as SDPA's boolean masks)
        return original(query, keys, values, attn_mask=allowed.to(query.device), **kwargs)
    scaled_dot_product_attention._context_parallel = True
    return scaled_dot_product_attention


@contextlib.contextmanager
def context_parallel(mesh, *, buffers=None, buffer_seq_dims=None, no_restore_buffers=None):
    """Inside: each buffer holds this rank's part of its sequence dim (in place: its shape changes), and
    F.scaled_dot_product_attention is the context-parallel one (its inputs (..., seq, head_dim), seq split as the
    buffers are). On exit the buffers get their whole values back, except those in no_restore_buffers."""
    from trainrun._autograd import no_grad
    from trainrun.nn import functional as F
    buffers = [] if buffers is None else list(buffers)
    buffer_seq_dims = [] if buffer_seq_dims is None else list(buffer_seq_dims)
    no_restore_buffers = set() if no_restore_buffers is None else no_restore_buffers
    if len(buffers) != len(buffer_seq_dims):
        raise ValueError("`seq_dims` must have the same number of elements as `buffers`.")
    for buffer in no_restore_buffers:
        if not any(b is buffer for b in buffers):
            raise ValueError("`no_restore_buffers` must be a subset of `buffers`.")
    with no_grad():
        originals = [None if any(b is n for n in no_restore_buffers) else b.clone() for b in buffers]
        for buffer, dim in zip(buffers, buffer_seq_dims):
            part = _shard(buffer, mesh, dim).clone()
            buffer.resize_(part.shape)
            buffer.copy_(part)
    original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _context_parallel_sdpa(original, mesh)
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original
        with no_grad():
            for buffer, whole in zip(buffers, originals):
                if whole is not None:
                    buffer.resize_(whole.shape)
                    buffer.copy_(whole)


def context_parallel_unshard(mesh, buffers, seq_dims):
    """The whole sequence of each buffer sharded by context_parallel (outputs, say), on every rank."""
    from trainrun._autograd import no_grad
    with no_grad():
        return [_in_global_order(_GatherSequence.apply(mesh.get_group(), dim, b), mesh.size(), dim)
                for b, dim in zip(buffers, seq_dims)]


def set_rotate_method(rotate_method):
    """How key/value parts travel: "allgather" (gathered at once) or "alltoall"; here both gather (the results are
    the same; the choice is recorded)."""
    if rotate_method not in ("allgather", "alltoall"):
        raise NotImplementedError(f"Context Parallel does not support using {rotate_method} for kv shards rotation")
    _cp_options.rotate_method = rotate_method
