"""save(): every rank writes the pieces it is assigned into one data file of a
temporary folder; rank 0 writes the metadata and the commit marker, then
renames the folder into place (atomic: a folder at the checkpoint's path is
always complete)."""
import concurrent.futures
import json
import os
import shutil
import threading

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


def _my_pieces(leaves, compared):
    """This rank's candidate pieces, and the non-tensor values, from the flat state dict. compared: other
    ranks' plans will be checked against this one (so plain tensors carry a checksum)."""
    from trainrun import _C
    from trainrun.distributed.tensor._dtensor import DTensor
    pieces, values, tensors = [], {}, {}
    for leaf in leaves:
        v = leaf.value
        if isinstance(v, (DTensor, _C.Tensor)):
            local, shape, offsets, _ = _chunks.local_piece(v)
            nbytes = local.numel() * local.element_size()
            # A plain tensor is taken to be the same on every rank (PyTorch's rule) and written once: its
            # checksum lets the plans prove it, so a shard passed as a plain tensor is refused, not half-saved.
            digest = _data_files.checksum(_data_files.tensor_bytes(local)) \
                if compared and not isinstance(v, DTensor) else None
            pieces.append((leaf.fqn, _data_files.dtype_name(local.dtype), shape, offsets, tuple(local.shape),
                           nbytes, digest))
            if nbytes:
                tensors[(leaf.fqn, offsets)] = local
        else:
            values[leaf.fqn] = _json_value(leaf)
    return pieces, values, tensors


def _merged_values(per_rank):
    """The non-tensor values of every rank's state dict: one value where every rank that has the key agrees,
    else the list of each rank's (a data loader position per rank; None where a rank lacks the key)."""
    names = sorted({name for values in per_rank for name in values})
    merged = {}
    for name in names:
        held = [values[name] for values in per_rank if name in values]
        merged[name] = held[0] if all(v == held[0] for v in held) and len(held) == len(per_rank) \
            else [values.get(name) for values in per_rank]
    return merged


def assign_writers(plans):
    """plans[r]: rank r's pieces. Every distinct piece (name, offsets) is written once, by the least loaded of
    the ranks that hold it (largest pieces first), so replicated tensors are not written N times and no rank
    writes much more than the others. Every rank computes the same answer from the same plans."""
    holders, info, digests = {}, {}, {}
    for rank, pieces in enumerate(plans):
        for name, dtype, shape, offsets, sizes, nbytes, digest in pieces:
            key = (name, tuple(offsets))
            mine = (dtype, tuple(shape), tuple(sizes), nbytes)
            if key in info and (info[key] != mine or digests[key] != digest):  # never one rank's piece for all
                other = holders[key][0]
                raise ValueError(f"save: '{name}' differs between rank {other} ({info[key][0]} "
                                 f"{list(info[key][1])}) and rank {rank} ({dtype} {list(shape)}); a tensor split "
                                 "over ranks must be a DTensor (model.state_dict() gives DTensors for sharded "
                                 "parameters)")
            holders.setdefault(key, []).append(rank)
            info[key], digests[key] = mine, digest
    load = [0] * len(plans)
    writer = {}
    for key in sorted(holders, key=lambda k: (-info[k][3], k)):
        rank = min(holders[key], key=lambda r: (load[r], r))
        writer[key] = rank
        load[rank] += info[key][3]
    return writer, info


class _SavePlan:
    """What one rank's save has decided before writing: the pieces it writes and the values rank 0 records."""

    def __init__(self, folder, rank, world, distributed, mine, info, values, tensors, paths):
        self.folder, self.rank, self.world, self.distributed = folder, rank, world, distributed
        self.mine, self.info, self.values, self.tensors = mine, info, values, tensors
        self.paths = paths  # fqn -> the keys from the root (the metadata records them)


def _prepare(state_dict, checkpoint_id, storage_writer, planner, process_group, no_dist, what):
    """Plans the save on every rank (one exchange of plans) and makes the temporary folder."""
    from trainrun.distributed.checkpoint.filesystem import FileSystemWriter, folder_of
    checkpoint_id = folder_of(checkpoint_id, storage_writer, FileSystemWriter, what)
    from trainrun.distributed.checkpoint.default_planner import DefaultSavePlanner, check_planner
    check_planner(planner, DefaultSavePlanner, what)
    folder = os.path.abspath(str(checkpoint_id))
    distributed = dist.is_initialized() and not no_dist
    rank = dist.get_rank(process_group) if distributed else 0
    world = dist.get_world_size(process_group) if distributed else 1
    leaves, _ = flatten(state_dict)
    pieces, values, tensors = _my_pieces(leaves, compared=distributed and world > 1)
    paths = {leaf.fqn: json.dumps(list(leaf.path)) for leaf in leaves}
    if distributed:
        # The ranks may hold different keys (pipeline stages: each its own layers); the checkpoint has them all.
        exchanged = [None] * world
        dist.all_gather_object(exchanged, (pieces, values, paths), group=process_group)
        plans = [e[0] for e in exchanged]
        values = _merged_values([e[1] for e in exchanged])
        paths = {name: path for e in exchanged for name, path in e[2].items()}
    else:
        plans = [pieces]
    writer, info = assign_writers(plans)
    partial = folder + PARTIAL_SUFFIX
    if rank == 0:
        shutil.rmtree(partial, ignore_errors=True)  # a save that died before
        os.makedirs(partial)
    if distributed:
        dist.barrier(group=process_group)
    mine = [key for key, r in writer.items() if r == rank and info[key][3] > 0]
    return _SavePlan(folder, rank, world, distributed, mine, info, values, tensors, paths)


def _write(plan, group):
    """Writes this rank's data file, then rank 0 the metadata and the commit (collectives on `group`)."""
    partial = plan.folder + PARTIAL_SUFFIX
    info, rank = plan.info, plan.rank
    file_name = f"__{rank}_0.distcp.safetensors"
    entries = [(f"{name}@{','.join(map(str, offsets))}", info[(name, offsets)][0], info[(name, offsets)][2],
                _data_files.tensor_bytes(plan.tensors[(name, offsets)])) for name, offsets in plan.mine]
    locations = _data_files.write_data_file(os.path.join(partial, file_name), entries) if entries else []
    written = [(name, offsets, file_name, loc) for (name, offsets), loc in zip(plan.mine, locations)]
    if plan.distributed:
        gathered = [None] * plan.world if rank == 0 else None
        dist.gather_object(written, gathered, dst=dist.get_global_rank(group, 0) if group is not None else 0,
                           group=group)
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
        for name, text in plan.values.items():
            if isinstance(text, list):  # (JSON null for a rank that does not have the key)
                metadata.items[name].per_rank.json[:] = [t if t is not None else "null" for t in text]
            else:
                metadata.items[name].json = text
        for name, path in plan.paths.items():
            if name in metadata.items:
                metadata.items[name].path_json = path
        _metadata.write(partial, metadata)  # each data file was fsynced by its writer, this one by write()
        with open(os.path.join(partial, _metadata.COMMIT_MARKER), "w") as f:
            f.write("committed\n")
            f.flush()
            os.fsync(f.fileno())
        _metadata.fsync_path(partial)
        _commit(partial, plan.folder)
    if plan.distributed:  # every rank returns once the checkpoint is in place, with its metadata
        shared = [metadata.SerializeToString() if rank == 0 else None]
        dist.broadcast_object_list(shared, src=dist.get_global_rank(group, 0) if group is not None else 0,
                                   group=group)
        if rank != 0:
            metadata.ParseFromString(shared[0])
    from trainrun.distributed.checkpoint.metadata import from_proto
    return from_proto(metadata)


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None, no_dist=False):
    """Writes state_dict (model and optimizer state dicts, Stateful objects, JSON values) to the folder
    checkpoint_id, each rank its own pieces: DTensor shards with their global offsets, replicated tensors
    once. Every rank of process_group calls it; their keys may differ (pipeline stages each hold their own
    layers), and the checkpoint holds the union. Returns the metadata."""
    plan = _prepare(state_dict, checkpoint_id, storage_writer, planner, process_group, no_dist, "save")
    return _write(plan, process_group)


_ASYNC = {"group": None, "group_of": None, "pending": None}


def async_save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None,
               no_dist=False):
    """save() that blocks only to plan and to copy this rank's pieces into staging memory, then writes them
    from a background thread while training goes on. Returns a concurrent.futures.Future whose result() is
    the metadata (or raises the save's error). A previous async_save is finished first. The background
    writes talk over a process group of their own (made on the first call), so they never interleave with
    training's collectives."""
    previous = _ASYNC["pending"]
    if previous is not None:
        previous.result()
    plan = _prepare(state_dict, checkpoint_id, storage_writer, planner, process_group, no_dist, "async_save")
    from trainrun._autograd import no_grad
    with no_grad():
        plan.tensors = {key: plan.tensors[key].detach().clone() for key in plan.mine}  # the staging copy
    group = None
    if plan.distributed:
        key = tuple(dist.get_process_group_ranks(process_group)) if process_group is not None else None
        if _ASYNC["group"] is None or _ASYNC["group_of"] != key:
            _ASYNC["group"] = dist.new_group(list(key) if key is not None else None)
            _ASYNC["group_of"] = key
        group = _ASYNC["group"]
    future = concurrent.futures.Future()

    def write():
        try:
            future.set_result(_write(plan, group))
        except BaseException as e:  # noqa: B902 - handed to whoever waits on the future
            future.set_exception(e)

    threading.Thread(target=write, name="trainrun-async-save", daemon=True).start()
    _ASYNC["pending"] = future
    return future


def _commit(partial, folder):
    """Puts the complete folder at its path: a rename, atomic. Saving over an existing checkpoint keeps the
    old one as <folder>.old until the new one is in place; a crash between the two renames leaves only
    <folder>.old, which load() reads (_metadata.committed_folder)."""
    old = folder + ".old"
    if os.path.exists(folder):
        shutil.rmtree(old, ignore_errors=True)
        os.rename(folder, old)
    os.rename(partial, folder)
    _metadata.fsync_path(os.path.dirname(folder) or ".")
    shutil.rmtree(old, ignore_errors=True)
