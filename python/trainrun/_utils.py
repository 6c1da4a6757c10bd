"""torch._utils: the private helpers training code imports from PyTorch by this path — the device-type lookups
(torchtitan's device utilities), the dense flatten/unflatten pair that bucketing code (apex, Megatron) uses to
pack gradients into one buffer, and _take_tensors."""
import trainrun


def _get_available_device_type():
    """The accelerator this process can use ("cuda"), or None when there is none."""
    return "cuda" if trainrun.cuda.is_available() else None


def _get_device_module(device_type="cuda"):
    """trainrun.cuda for "cuda" (PyTorch's default), trainrun.cpu for "cpu"."""
    module = getattr(trainrun, device_type, None)
    if module is None:
        raise RuntimeError(f"_get_device_module: trainrun has no device module '{device_type}'")
    return module


def _get_device_index(device, optional=False, allow_cpu=False):
    """The index of a device given as a torch.device, a string or an int; a device without an index is the current
    one of its type when `optional`, and the CPU is -1 when `allow_cpu` (PyTorch's rules and messages)."""
    if isinstance(device, str):
        device = trainrun.device(device)
    if isinstance(device, int):
        return device
    if device is None:
        index = None
    elif isinstance(device, trainrun.device):
        if device.type == "cpu":
            if not allow_cpu:
                raise ValueError(f"Expected a non cpu device, but got: {device}")
            return -1
        index = device.index
    else:
        raise ValueError(f"Expected a torch.device, a string or an integer, but got: {device!r}")
    if index is None:
        if not optional:
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        return trainrun.cuda.current_device()
    return index


def _flatten_dense_tensors(tensors):
    """One 1-D tensor holding the tensors' elements one after another (a copy; the dtype of the first)."""
    tensors = list(tensors)
    if len(tensors) == 1:
        return tensors[0].contiguous().view(-1)
    return trainrun.cat([t.contiguous().view(-1) for t in tensors])


def _unflatten_dense_tensors(flat, tensors):
    """Views of `flat` shaped as each of `tensors`, in order (what _flatten_dense_tensors packed)."""
    out, offset = [], 0
    for t in tensors:
        n = t.numel()
        out.append(flat.narrow(0, offset, n).view_as(t))
        offset += n
    return tuple(out)


def _take_tensors(tensors, size_limit):
    """Groups of tensors of one type each, every group (but a lone big tensor) at most size_limit bytes, in order
    of first appearance of each type."""
    buckets = {}  # type -> (tensors, bytes)
    for t in tensors:
        key = (t.dtype, t.device.type)
        group, size = buckets.get(key, ([], 0))
        nbytes = t.numel() * t.element_size()
        if group and size + nbytes > size_limit:
            yield group
            group, size = [], 0
        group.append(t)
        buckets[key] = (group, size + nbytes)
    for group, _ in buckets.values():
        if group:
            yield group
