"""Backend names and the devices they serve, as torch.distributed's: Backend ("gloo", "nccl", or a device map
"cpu:gloo,cuda:nccl"), get_default_backend_for_device, and what init_process_group's device_id binds to."""


class Backend(str):
    """Backend names, as torch.distributed.Backend: "gloo", "nccl", or one backend per device, "cpu:gloo,cuda:nccl"
    (a group whose collectives go to the backend of their tensors' device)."""
    GLOO = "gloo"
    NCCL = "nccl"
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL}

    def __new__(cls, name):
        value = str(name).lower()
        names = [entry.partition(":")[2] for entry in value.split(",")] if ":" in value else [value]
        for one in names:
            if one not in (cls.GLOO, cls.NCCL):
                raise ValueError(f"Invalid backend: '{name}' (trainrun has 'gloo' and 'nccl', or a device map "
                                 "such as 'cpu:gloo,cuda:nccl')")
        return super().__new__(cls, value)


def get_default_backend_for_device(device):
    """The backend PyTorch picks for a device type: "gloo" for cpu, "nccl" for cuda."""
    kind = device if isinstance(device, str) else device.type
    kind = kind.split(":")[0]
    if kind not in Backend.default_device_backend_map:
        raise ValueError(f"get_default_backend_for_device: no default backend for device type '{kind}'")
    return Backend.default_device_backend_map[kind]


def bound_device(device_id):
    """init_process_group's device_id as a device: a device (cuda ones with an index), or an int, the index of
    a CUDA device (the accelerator PyTorch takes an int for)."""
    from trainrun import device as _device, cuda
    if isinstance(device_id, bool) or not isinstance(device_id, (int, str, _device)):
        raise TypeError(f"init_process_group: device_id must be a torch.device or an int, not "
                        f"{type(device_id).__name__}")
    if isinstance(device_id, int):
        if not cuda.is_available():
            raise ValueError(f"init_process_group: device_id={device_id} names an accelerator index, but this "
                             "machine has no CUDA device (pass torch.device('cpu') or leave it None)")
        device_id = _device("cuda", device_id)
    device_id = _device(device_id)
    if device_id.type != "cpu" and device_id.index is None:
        raise ValueError(f"init_process_group: device_id must be a {device_id.type} device with an index, e.g. "
                         f"{device_id.type}:0, not just {device_id.type}")
    return device_id
