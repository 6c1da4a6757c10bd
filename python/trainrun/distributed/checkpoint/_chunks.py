"""Which piece of each global tensor a rank holds, and how saved pieces
overlap the pieces a rank needs (the geometry behind resharding)."""
from trainrun.distributed.tensor._dtensor import DTensor
from trainrun.distributed.tensor._redistribute import local_shape
from trainrun.distributed.tensor.placement_types import Partial, Shard


def local_piece(value):
    """(local tensor, global shape, offsets, replicated_over) of a state-dict tensor. A DTensor's local shard
    sits at offsets given by its Shard placements (outermost mesh dim first, as nested sharding splits, with
    FSDP's strided shards inside the tensor-parallel ones);
    `replicated_over` says which ranks hold the same piece (all of them for a plain tensor: None)."""
    if not isinstance(value, DTensor):
        return value, tuple(value.shape), (0,) * value.dim(), None
    spec = value._spec
    if any(isinstance(p, Partial) for p in spec.placements):
        raise ValueError("checkpoint: a DTensor with Partial placements cannot be saved; redistribute it to "
                         "Shard or Replicate first")
    sizes, offsets = local_shape(spec.shape, spec.mesh, spec.placements)
    local = value.to_local()
    if list(local.shape) != sizes:  # FSDP pads nothing into its shards; a mismatch is a bug worth naming
        raise ValueError(f"checkpoint: the local shard is {list(local.shape)} but its placements give {sizes}")
    replicated = [d for d, p in enumerate(spec.placements) if not isinstance(p, Shard)]
    return local, tuple(spec.shape), tuple(offsets), (spec.mesh, tuple(replicated))


def overlap(offsets_a, sizes_a, offsets_b, sizes_b):
    """The intersection of two boxes as (offsets, sizes), or None when they do not meet."""
    start = [max(a, b) for a, b in zip(offsets_a, offsets_b)]
    end = [min(a + s, b + t) for a, s, b, t in zip(offsets_a, sizes_a, offsets_b, sizes_b)]
    if any(e <= s for s, e in zip(start, end)) and len(start) > 0:
        return None
    return start, [e - s for s, e in zip(start, end)]


def box(tensor, offsets, sizes, origin):
    """The view of `tensor` (whose element [0, ...] is at global `origin`) covering the global box."""
    view = tensor
    for d, (o, s, base) in enumerate(zip(offsets, sizes, origin)):
        view = view.narrow(d, o - base, s)
    return view

