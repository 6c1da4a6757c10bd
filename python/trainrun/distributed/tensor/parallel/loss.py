"""loss_parallel(): inside it, F.cross_entropy takes logits sharded along
the class dim (a DTensor with Shard(-1), what a ColwiseParallel output
projection gives with use_local_output=False) and computes the loss without
gathering the logits: the max and the sum of exponentials are reduced over
the ranks, and each rank reads the target logits it holds."""
import contextlib

from trainrun import _C
from trainrun.distributed.tensor._dtensor import DTensor
from trainrun.distributed.tensor.placement_types import Partial, chunk_offsets, chunk_sizes
from trainrun.nn import functional as F

_ACTIVE = []


def _reduced(local, mesh, op="sum"):
    """The sum (or max) over the mesh of each rank's local term; the gradient of each term is the whole
    gradient (a Partial made Replicate)."""
    return DTensor.from_local(local, mesh, [Partial(op)], shape=tuple(local.shape)).full_tensor()


def vocab_parallel_cross_entropy(logits, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                                 reduction="mean", label_smoothing=0.0):
    if weight is not None or label_smoothing or size_average is not None or reduce is not None:
        raise NotImplementedError("loss_parallel: cross_entropy with weight, label_smoothing or the legacy "
                                  "arguments is not supported")
    mesh = logits.device_mesh
    if mesh.ndim != 1 or not logits.placements[0].is_shard(logits.ndim - 1):
        raise ValueError(f"loss_parallel: the logits must be sharded on the class dim (Shard(-1)) over a 1-D mesh, "
                         f"got {list(logits.placements)}")
    if isinstance(target, DTensor):
        target = target.full_tensor()
    local = logits.to_local()
    classes = logits.shape[-1]
    n, me = mesh.size(0), mesh.get_local_rank(0)
    start, count = chunk_offsets(classes, n)[me], chunk_sizes(classes, n)[me]
    top = _reduced(local.detach().amax(dim=-1, keepdim=True) if count else
                   _C.full(list(local.shape[:-1]) + [1], float("-inf"), dtype=local.dtype, device=local.device),
                   mesh, "max")
    shifted = local - top
    total = _reduced(_C.exp(shifted).sum(dim=-1), mesh)
    mine = (target >= start) & (target < start + count)
    index = _C.where(mine, target - start, _C.zeros([], dtype=target.dtype, device=target.device)).unsqueeze(-1)
    picked_local = shifted.gather(-1, index).squeeze(-1) * mine.to(local.dtype) if count else \
        _C.zeros(list(target.shape), dtype=local.dtype, device=local.device)
    picked = _reduced(picked_local, mesh)
    loss = _C.log(total) - picked
    keep = (target != ignore_index).to(loss.dtype)
    loss = loss * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / keep.sum()
    raise ValueError(f"cross_entropy: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


_plain_cross_entropy = F.cross_entropy


def _cross_entropy(input, target, *args, **kwargs):  # noqa: A002
    if _ACTIVE and isinstance(input, DTensor):
        return vocab_parallel_cross_entropy(input, target, *args, **kwargs)
    return _plain_cross_entropy(input, target, *args, **kwargs)


F.cross_entropy = _cross_entropy


@contextlib.contextmanager
def loss_parallel():
    """Within it, F.cross_entropy on class-sharded DTensor logits needs no gather (see the module doc)."""
    _ACTIVE.append(True)
    try:
        yield
    finally:
        _ACTIVE.pop()
