"""dcp.load from one torch.save file (format_utils.BroadcastingTorchSaveReader with DynamicMetaLoadPlanner):
the coordinator rank reads the file, checks that it has every entry of the state dict being loaded, with its
shape, and broadcasts each tensor whole; every rank keeps its piece (a DTensor's local shard) in place. Other
values come from the coordinator's file too. The check comes first and every rank hears its verdict, so a
bad file is an error on every rank, not a rank waiting for a broadcast that never comes."""
from trainrun.distributed.checkpoint._state_dict_tree import flatten


def _is_tensor(value):
    return hasattr(value, "shape") and hasattr(value, "dtype") and callable(getattr(value, "copy_", None))


def _read_and_check(path, leaves):
    """(the file's values by flattened name, None) or (None, what is wrong)."""
    import trainrun
    try:
        loaded = trainrun.load(str(path), map_location="cpu", weights_only=False)
    except Exception as e:  # (told to every rank below)
        return None, f"cannot read it: {type(e).__name__}: {e}"
    if not isinstance(loaded, dict):
        return None, f"it holds a {type(loaded).__name__}, not a state dict"
    file_leaves, _ = flatten(loaded)
    values = {leaf.fqn: leaf.value for leaf in file_leaves}
    missing = [leaf.fqn for leaf in leaves if leaf.fqn not in values]
    if missing:
        has = f"its entries begin {sorted(values)[:5]}" if values else "it holds no entries"
        return None, f"it has no {missing[:5]} ({has})"
    for leaf in leaves:
        target, value = leaf.value, values[leaf.fqn]
        if _is_tensor(target) and (not _is_tensor(value) or tuple(value.shape) != tuple(target.shape)):
            got = tuple(value.shape) if _is_tensor(value) else type(value).__name__
            return None, f"'{leaf.fqn}' is {got} in the file, {tuple(target.shape)} in the state dict"
    return values, None


def load_broadcast(state_dict, path, coordinator_rank, process_group):
    from trainrun import distributed as dist
    from trainrun import empty
    from trainrun._autograd import no_grad
    from trainrun.distributed.tensor._dtensor import DTensor
    from trainrun.distributed.tensor._redistribute import redistribute_local
    from trainrun.distributed.tensor.placement_types import Replicate
    if path is None:
        raise ValueError("dcp.load: BroadcastingTorchSaveReader reads the torch.save file named by checkpoint_id; "
                         "none was given")
    leaves, statefuls = flatten(state_dict)
    distributed = dist.is_initialized()
    coordinator = not distributed or dist.get_rank() == coordinator_rank
    values, problem = _read_and_check(path, leaves) if coordinator else (None, None)
    if distributed:
        verdict = [problem]
        dist.broadcast_object_list(verdict, src=coordinator_rank, group=process_group)
        problem = verdict[0]
    if problem is not None:
        raise RuntimeError(f"dcp.load: the torch.save file {path} cannot fill the state dict: {problem}")
    others = {}
    with no_grad():
        for leaf in leaves:
            target = leaf.value
            if not _is_tensor(target):
                others[leaf.fqn] = values[leaf.fqn] if coordinator else None
                continue
            full = values[leaf.fqn].to(target.dtype) if coordinator else empty(tuple(target.shape), dtype=target.dtype)
            if distributed:
                full = full.contiguous()
                dist.broadcast(full, src=coordinator_rank, group=process_group)
            if isinstance(target, DTensor):
                replicated = tuple(Replicate() for _ in target.placements)
                piece = redistribute_local(full, tuple(target.shape), target.device_mesh, replicated,
                                           target.placements)
                target.to_local().copy_(piece)
            else:
                target.copy_(full)
    if others:
        box = [others]
        if distributed:
            dist.broadcast_object_list(box, src=coordinator_rank, group=process_group)
        for leaf in leaves:
            if leaf.fqn in box[0]:
                leaf.set(box[0][leaf.fqn])
    for obj, inner in reversed(statefuls):  # inner objects first
        obj.load_state_dict(inner)
