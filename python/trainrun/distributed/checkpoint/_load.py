"""load(): each rank reads, from a committed checkpoint, exactly the saved
pieces that overlap the pieces its state dict holds now (whatever the
placements were at save time: this is resharding), checks every piece's
CRC-32C, and only when everything is checked reads it into the state dict
in place (_data_files.PieceReader). A failure loads nothing."""
import json

from trainrun import _C
from trainrun.distributed.checkpoint import _chunks, _data_files, _metadata, _pytorch_dcp
from trainrun.distributed.checkpoint._state_dict_tree import flatten
from trainrun.distributed.tensor._dtensor import DTensor


class _Copy:
    """One saved piece's part of one destination: `destination` (a view of the state dict's tensor) gets the
    piece's elements in the global box (start, extent); the piece's own box starts at `origin`."""

    __slots__ = ("destination", "key", "start", "extent", "origin")

    def __init__(self, destination, key, start, extent, origin):
        self.destination, self.key, self.start, self.extent, self.origin = destination, key, start, extent, origin


def _plan(folder, metadata, leaves, rank=0, world=1):
    """What to read: ({(file, byte offset): (chunk, dtype)} of the saved pieces this rank needs, [_Copy]), and
    [(leaf, value)] for the non-tensor leaves (a value saved per rank: this rank's). Reads no tensor bytes."""
    missing = [leaf.fqn for leaf in leaves if leaf.fqn not in metadata.items]
    if missing:
        raise KeyError(f"load: checkpoint '{folder}' has no {', '.join(repr(m) for m in missing[:5])}"
                       f"{' and %d more' % (len(missing) - 5) if len(missing) > 5 else ''}")
    copies, values, pieces = [], [], {}
    for leaf in leaves:
        item = metadata.items[leaf.fqn]
        v = leaf.value
        if not isinstance(v, (DTensor, _C.Tensor)):
            kind = item.WhichOneof("kind")
            if kind == "per_rank":
                saved = len(item.per_rank.json)
                if saved != world:
                    raise ValueError(f"load: '{leaf.fqn}' was saved per rank by {saved} ranks in checkpoint "
                                     f"'{folder}'; {world} rank(s) load it now, so no rank's value is theirs")
                values.append((leaf, json.loads(item.per_rank.json[rank])))
                continue
            if kind != "json":
                raise TypeError(f"load: '{leaf.fqn}' is a tensor in checkpoint '{folder}' but a "
                                f"{type(v).__name__} in the state dict")
            values.append((leaf, json.loads(item.json)))
            continue
        if item.WhichOneof("kind") != "tensor":
            raise TypeError(f"load: '{leaf.fqn}' is a value in checkpoint '{folder}' but a tensor in the state dict")
        saved = item.tensor
        local, shape, offsets, _ = _chunks.local_piece(v)
        dtype = _data_files.dtype_name(local.dtype)
        if tuple(saved.global_shape) != tuple(shape):
            raise ValueError(f"load: '{leaf.fqn}' is {list(saved.global_shape)} in checkpoint '{folder}' but "
                             f"{list(shape)} in the state dict")
        if saved.dtype != dtype:
            raise TypeError(f"load: '{leaf.fqn}' is {saved.dtype} in checkpoint '{folder}' but {dtype} in the state "
                            "dict")
        sizes, covered = list(local.shape), 0
        for chunk in saved.chunks:
            meet = _chunks.overlap(list(offsets), sizes, list(chunk.offsets), list(chunk.sizes))
            if meet is None:
                continue
            key = (chunk.file, chunk.byte_offset)
            pieces.setdefault(key, (chunk, saved.dtype))  # each saved piece is read (and checked) once
            start, extent = meet
            copies.append(_Copy(_chunks.box(local, start, extent, offsets), key, start, extent, list(chunk.offsets)))
            n = 1
            for e in extent:
                n *= e
            covered += n
        if covered != local.numel():
            raise ValueError(f"load: checkpoint '{folder}' covers {covered} of the {local.numel()} elements "
                             f"'{leaf.fqn}' needs here")
    return (pieces, copies), values


def _read_planned(reader, pieces, copies):
    """Reads the verified pieces into their destinations: straight in where a piece is wholly one contiguous
    destination (the same layout as at save time), else through the piece read whole."""
    reader.check_unchanged()  # every file, before the first byte goes in
    by_piece = {}
    for c in copies:
        by_piece.setdefault(c.key, []).append(c)
    for key, parts in by_piece.items():
        chunk, dtype = pieces[key]
        if (len(parts) == 1 and list(parts[0].extent) == list(chunk.sizes)
                and reader.read_into(chunk, dtype, parts[0].destination)):
            continue
        piece = reader.read_piece(chunk, dtype)
        for c in parts:
            c.destination.copy_(_chunks.box(piece, c.start, c.extent, c.origin))


def _plan_from_pytorch(folder, leaves):
    """_plan for a folder PyTorch's DCP wrote: its items read whole (_pytorch_dcp), each leaf's piece cut out."""
    full, _ = _pytorch_dcp.read_all(folder)
    found = {leaf.fqn: _pytorch_dcp.lookup(full, leaf.fqn) for leaf in leaves}
    missing = [name for name, value in found.items() if value is _pytorch_dcp.MISSING]
    if missing:
        raise KeyError(f"load: PyTorch checkpoint '{folder}' has no {', '.join(repr(m) for m in missing[:5])}")
    copies, values = [], []
    for leaf in leaves:
        v, saved = leaf.value, found[leaf.fqn]
        if not isinstance(v, (DTensor, _C.Tensor)):
            values.append((leaf, saved))
            continue
        if not _C._is_cpp_tensor(saved):
            raise TypeError(f"load: '{leaf.fqn}' is a value in PyTorch checkpoint '{folder}' but a tensor here")
        local, shape, offsets, _ = _chunks.local_piece(v)
        if tuple(saved.shape) != tuple(shape) or saved.dtype != local.dtype:
            raise ValueError(f"load: '{leaf.fqn}' is {saved.dtype} {list(saved.shape)} in PyTorch checkpoint "
                             f"'{folder}' but {local.dtype} {list(shape)} here")
        piece = saved
        for dim, (start, size) in enumerate(zip(offsets, local.shape)):
            piece = piece.narrow(dim, start, size)
        copies.append((local, piece))
    return copies, values


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None, process_group=None, no_dist=False):
    """Loads checkpoint_id into state_dict in place: tensors (DTensor shards too) get their values whatever
    the sharding was at save time; other values and Stateful objects are replaced and reloaded. Keys of the
    checkpoint that state_dict does not have are ignored; keys it lacks are an error naming them."""
    from trainrun.distributed.checkpoint.default_planner import DefaultLoadPlanner, check_planner
    from trainrun.distributed.checkpoint.format_utils import BroadcastingTorchSaveReader, DynamicMetaLoadPlanner
    if isinstance(storage_reader, BroadcastingTorchSaveReader):  # one torch.save file, read by one rank
        if planner is not None and type(planner) not in (DynamicMetaLoadPlanner, DefaultLoadPlanner):
            raise NotImplementedError(f"dcp.load: BroadcastingTorchSaveReader plans with DynamicMetaLoadPlanner, "
                                      f"not {type(planner).__name__}")
        from trainrun.distributed.checkpoint._torch_save_broadcast import load_broadcast
        return load_broadcast(state_dict, checkpoint_id if checkpoint_id is not None else
                              storage_reader.checkpoint_id, storage_reader.coordinator_rank, process_group)
    from trainrun.distributed.checkpoint.filesystem import FileSystemReader, folder_of
    checkpoint_id = folder_of(checkpoint_id, storage_reader, FileSystemReader, "load")
    partial = check_planner(planner, DefaultLoadPlanner, "load")
    from trainrun._autograd import no_grad
    folder = _metadata.committed_folder(str(checkpoint_id))  # (a save over it that died mid-commit: the old one)
    leaves, statefuls = flatten(state_dict)
    if _pytorch_dcp.is_pytorch_dcp(folder):
        if partial:  # allow_partial_load: what the checkpoint lacks keeps its value
            full, _ = _pytorch_dcp.read_all(folder)
            leaves = [leaf for leaf in leaves if _pytorch_dcp.lookup(full, leaf.fqn) is not _pytorch_dcp.MISSING]
        copies, values = _plan_from_pytorch(folder, leaves)  # read and checked whole first
        with no_grad():
            for destination, source in copies:
                destination.copy_(source)
    else:
        metadata = _metadata.read(folder)
        if partial:
            leaves = [leaf for leaf in leaves if leaf.fqn in metadata.items]
        from trainrun import distributed as dist
        distributed = dist.is_initialized() and not no_dist
        rank = dist.get_rank(process_group) if distributed else 0
        world = dist.get_world_size(process_group) if distributed else 1
        (pieces, copies), values = _plan(folder, metadata, leaves, rank, world)
        reader = _data_files.PieceReader(folder)
        try:
            reader.verify(list(pieces.values()))  # a bad file raises here: nothing is loaded
            with no_grad():
                _read_planned(reader, pieces, copies)
        finally:
            reader.close()
    for leaf, value in values:
        leaf.set(value)
    for obj, inner in reversed(statefuls):  # inner objects first
        obj.load_state_dict(inner)
