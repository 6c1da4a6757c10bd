"""save(): every rank writes the pieces it is assigned into one data file of a
temporary folder; rank 0 writes the metadata and the commit marker, then
renames the folder into place (atomic: a folder at the checkpoint's path is
always complete)."""
import json
import os
import shutil

from trainrun import distributed as dist
from trainrun.distributed.checkpoint import _chunks, _data_files, _metadata
from trainrun.distributed.checkpoint._state_dict_tree import flatten

PARTIAL_SUFFIX = ".partial"


def _json_value(leaf):
    try:
        return json.dumps(leaf.value)
    except (TypeError, ValueError):
        raise TypeError(f"checkpoint: '{leaf.fqn}' is a {type(leaf.value).__name__}; non-tensor values must be "
                        "JSON values (numbers, strings, booleans, lists, dicts, None)") from None


def _my_pieces(leaves):
    """This rank's candidate pieces, and the non-tensor values, from the flat state dict."""
    from trainrun import _C
    from trainrun.distributed.tensor._dtensor import DTensor
    pieces, values, tensors = [], {}, {}
    for leaf in leaves:
        v = leaf.value
        if isinstance(v, (DTensor, _C.Tensor)):
            local, shape, offsets, _ = _chunks.local_piece(v)
            if local.numel() == 0 and local.dim() > 0:
                pieces.append((leaf.fqn, _data_files.dtype_name(local.dtype), shape, offsets, tuple(local.shape), 0))
                continue
            pieces.append((leaf.fqn, _data_files.dtype_name(local.dtype), shape, offsets, tuple(local.shape),
                           local.numel() * local.element_size()))
            tensors[(leaf.fqn, offsets)] = local
        else:
            values[leaf.fqn] = _json_value(leaf)
    return pieces, values, tensors


def assign_writers(plans):
    """plans[r]: rank r's pieces. Every distinct piece (name, offsets) is written once, by the least loaded of
    the ranks that hold it (largest pieces first), so replicated tensors are not written N times and no rank
    writes much more than the others. Every rank computes the same answer from the same plans."""
    holders, info = {}, {}
    for rank, pieces in enumerate(plans):
        for name, dtype, shape, offsets, sizes, nbytes in pieces:
            key = (name, tuple(offsets))
            holders.setdefault(key, []).append(rank)
            info[key] = (dtype, tuple(shape), tuple(sizes), nbytes)
    load = [0] * len(plans)
    writer = {}
    for key in sorted(holders, key=lambda k: (-info[k][3], k)):
        rank = min(holders[key], key=lambda r: (load[r], r))
        writer[key] = rank
        load[rank] += info[key][3]
    return writer, info


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None, no_dist=False):
    """Writes state_dict (model and optimizer state dicts, Stateful objects, JSON values) to the folder
    checkpoint_id, each rank its own pieces: DTensor shards with their global offsets, replicated tensors
    once. Every rank of process_group must call it with the same keys. Returns the metadata."""
    if checkpoint_id is None:
        raise ValueError("save: give checkpoint_id (the checkpoint's folder)")
    if storage_writer is not None or planner is not None:
        raise NotImplementedError("save: storage_writer and planner are not supported; checkpoints are folders")
    folder = os.path.abspath(str(checkpoint_id))
    distributed = dist.is_initialized() and not no_dist
    rank = dist.get_rank(process_group) if distributed else 0
    world = dist.get_world_size(process_group) if distributed else 1
    leaves, _ = flatten(state_dict)
    pieces, values, tensors = _my_pieces(leaves)
    if distributed:
        plans = [None] * world
        dist.all_gather_object(plans, pieces, group=process_group)
    else:
        plans = [pieces]
    writer, info = assign_writers(plans)
    names = [sorted(p[0] for p in plan) for plan in plans]
    if any(n != names[0] for n in names):
        raise ValueError(f"save: the ranks' state dicts have different tensors (rank 0: {len(names[0])}, rank "
                         f"{next(r for r, n in enumerate(names) if n != names[0])} differs)")

    partial = folder + PARTIAL_SUFFIX
    if rank == 0:
        shutil.rmtree(partial, ignore_errors=True)  # a save that died before
        os.makedirs(partial)
    if distributed:
        dist.barrier(group=process_group)
    mine = [key for key, r in writer.items() if r == rank and info[key][3] > 0]
    file_name = f"__{rank}_0.distcp.safetensors"
    entries = [(f"{name}@{','.join(map(str, offsets))}", info[(name, offsets)][0], info[(name, offsets)][2],
                _data_files.tensor_bytes(tensors[(name, offsets)])) for name, offsets in mine]
    locations = _data_files.write_data_file(os.path.join(partial, file_name), entries) if entries else []
    written = [(name, offsets, file_name, loc) for (name, offsets), loc in zip(mine, locations)]
    if distributed:
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(written, gathered, dst=dist.get_global_rank(process_group, 0)
                           if process_group is not None else 0, group=process_group)
    else:
        gathered = [written]
    metadata = _metadata.pb.Metadata()
    if rank == 0:
        for key, (dtype, shape, sizes, nbytes) in info.items():
            item = metadata.items[key[0]].tensor
            item.dtype, item.global_shape[:] = dtype, list(shape)
        for name, offsets, file_name, (byte_offset, length, crc) in (w for ws in gathered for w in ws):
            dtype, shape, sizes, _ = info[(name, offsets)]
            chunk = metadata.items[name].tensor.chunks.add()
            chunk.offsets[:], chunk.sizes[:] = list(offsets), list(sizes)
            chunk.file, chunk.byte_offset, chunk.byte_length, chunk.crc32c = file_name, byte_offset, length, crc
        for name, text in values.items():
            metadata.items[name].json = text
        _metadata.write(partial, metadata)  # each data file was fsynced by its writer, this one by write()
        with open(os.path.join(partial, _metadata.COMMIT_MARKER), "w") as f:
            f.write("committed\n")
            f.flush()
            os.fsync(f.fileno())
        _metadata.fsync_path(partial)
        _commit(partial, folder)
    if distributed:
        dist.barrier(group=process_group)  # every rank returns once the checkpoint is in place
    return metadata


def _commit(partial, folder):
    """Puts the complete folder at its path: a rename, atomic. Saving over an existing checkpoint keeps the
    old one as <folder>.old until the new one is in place."""
    old = folder + ".old"
    if os.path.exists(folder):
        shutil.rmtree(old, ignore_errors=True)
        os.rename(folder, old)
    os.rename(partial, folder)
    _metadata.fsync_path(os.path.dirname(folder) or ".")
    shutil.rmtree(old, ignore_errors=True)
