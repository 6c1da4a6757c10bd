"""trainrun.cuda: torch.cuda's API over trainrun's CUDA runtime.

Devices, streams and events, the caching allocator's statistics, and the
TF32 switch. On a machine without a usable GPU, is_available() is False and
anything that needs a GPU raises RuntimeError saying why.
"""
from trainrun import _C

_cuda = _C._cuda

OutOfMemoryError = _C.OutOfMemoryError
is_available = _cuda.is_available
device_count = _cuda.device_count
current_device = _cuda.current_device
get_device_name = _cuda.get_device_name
synchronize = _cuda.synchronize
memory_stats = _cuda.memory_stats
memory_allocated = _cuda.memory_allocated
max_memory_allocated = _cuda.max_memory_allocated
memory_reserved = _cuda.memory_reserved
max_memory_reserved = _cuda.max_memory_reserved
reset_peak_memory_stats = _cuda.reset_peak_memory_stats
empty_cache = _cuda.empty_cache
current_stream = _cuda.current_stream
default_stream = _cuda.default_stream
Event = _cuda.Event


def unavailable_reason():
    """Why is_available() is False ('' when it is True)."""
    return _cuda.unavailable_reason()


def set_device(device):
    _cuda.set_device(device)


def Stream(device=None, priority=0):  # noqa: N802  (PyTorch's class name)
    """A stream from the device's pool; priority < 0 asks for a high-priority one."""
    return _cuda.stream_from_pool(device, priority < 0)


class StreamContext:
    """`with trainrun.cuda.stream(s):` makes s the current stream (and its
    device the current device), restoring both after."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is None:
            return None
        self._device = _cuda.current_device()
        self._previous = _cuda.current_stream(self.stream.device)
        _cuda.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        _cuda.set_stream(self._previous)
        _cuda.set_device(self._device)
        return False


def stream(s):
    return StreamContext(s)


class device:  # noqa: N801  (PyTorch's name)
    """`with trainrun.cuda.device(1):` makes GPU 1 current for the block."""

    def __init__(self, index):
        self.index = index

    def __enter__(self):
        self._previous = _cuda.current_device()
        _cuda.set_device(self.index)

    def __exit__(self, *exc):
        _cuda.set_device(self._previous)
        return False


class _Matmul:
    """trainrun.backends.cuda.matmul.allow_tf32, as torch.backends has it."""

    @property
    def allow_tf32(self):
        return _cuda.allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, value):
        _cuda.set_allow_tf32(bool(value))


matmul = _Matmul()


def manual_seed(seed):
    """Seeds the random ops of every device (one default generator holds the CPU and the CUDA engines)."""
    import trainrun
    trainrun.manual_seed(seed)


manual_seed_all = manual_seed


def seed():
    import trainrun.random
    trainrun.random.seed()


seed_all = seed


def initial_seed():
    import trainrun
    return trainrun.initial_seed()


def get_rng_state(device="cuda"):
    """The CUDA draws' (seed, counter offset) as a uint8 tensor."""
    import trainrun.random
    return trainrun.random._counter_state()


def set_rng_state(new_state, device="cuda"):
    import trainrun.random
    trainrun.random._set_counter_state(new_state)


get_rng_state_all = lambda: [get_rng_state()]  # noqa: E731
set_rng_state_all = lambda states: set_rng_state(states[0])  # noqa: E731


def ipc_collect():
    """torch.cuda.ipc_collect: makes sure every CUDA block other processes have released (their tensors from
    this process's, sent through trainrun.multiprocessing, gone, or the processes themselves) is back in this
    process's caching allocator. The broker's notices are taken as they come; this waits for those already sent.
    Returns what is still out: {"leases_held": n, "allocations_open": m} (this process's blocks leased to
    others, other processes' allocations open here)."""
    from trainrun.multiprocessing import _broker
    for client in _broker.connected_clients():
        client.report()
    held, opened = _cuda._ipc_counts()
    return {"leases_held": held, "allocations_open": opened}


# ---- more of torch.cuda's surface, over the functions above -----------------------------------------------------
has_half = True  # (float16 kernels are built)
has_magma = False  # (linear algebra runs through cuSOLVER-free paths, not MAGMA)


def is_bf16_supported(including_emulation=True):
    """Whether bfloat16 tensors run here: on any GPU trainrun drives (its kernels compute bfloat16 in float)."""
    return is_available()


def init():
    """Initializes CUDA (it is initialized on first use anyway); raises, saying why, when there is no GPU."""
    if not is_available():
        raise RuntimeError(unavailable_reason())


def is_initialized():
    return is_available()


def set_stream(stream):
    """Makes `stream` the current stream of its device (None: nothing)."""
    if stream is not None:
        _cuda.set_stream(stream)


class device_of(device):  # noqa: N801  (PyTorch's name)
    """`with trainrun.cuda.device_of(tensor):` makes the tensor's GPU current (nothing for a CPU tensor)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if getattr(obj, "is_cuda", False) else -1)

    def __enter__(self):
        if self.index >= 0:
            super().__enter__()

    def __exit__(self, *exc):
        if self.index >= 0:
            return super().__exit__(*exc)
        return False


def memory_stats_as_nested_dict(device=None):
    """memory_stats with its dotted keys as nested dicts ({"allocated_bytes": {"all": {"current": ...}}})."""
    nested = {}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _renamed(old, new_name):
    def fn(device=None):
        import warnings
        warnings.warn(f"`torch.cuda.{old}` has been renamed to `torch.cuda.{new_name}`", FutureWarning, stacklevel=2)
        return globals()[new_name](device)
    fn.__name__ = old
    return fn


memory_cached = _renamed("memory_cached", "memory_reserved")
max_memory_cached = _renamed("max_memory_cached", "max_memory_reserved")
reset_max_memory_allocated = _renamed("reset_max_memory_allocated", "reset_peak_memory_stats")
reset_max_memory_cached = _renamed("reset_max_memory_cached", "reset_peak_memory_stats")


def memory_summary(device=None, abbreviated=False):
    """The caching allocator's statistics for `device` as a table (current and peak bytes, block counts, device
    allocations and frees, retries and out-of-memory errors)."""
    stats = memory_stats(device)
    index = current_device() if device is None else (device if isinstance(device, int) else
                                                      getattr(device, "index", None) or 0)

    def size(n):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    rows = [("Allocated memory", size(stats["allocated_bytes.all.current"]), size(stats["allocated_bytes.all.peak"])),
            ("Requested memory", size(stats["requested_bytes.all.current"]), ""),
            ("GPU reserved memory", size(stats["reserved_bytes.all.current"]), size(stats["reserved_bytes.all.peak"])),
            ("Active allocations", str(stats["active.all.current"]), ""),
            ("Cached blocks", str(stats["inactive_split.all.current"]), ""),
            ("GPU reserved segments", str(stats["segment.all.current"]), "")]
    width = 75
    lines = ["|" + "=" * width + "|", "|" + f" trainrun CUDA memory summary, device ID {index} ".center(width) + "|",
             "|" + "-" * width + "|", "|" + f" {'Metric':<30}|{'Cur Usage':>21} |{'Peak Usage':>19} " + "|",
             "|" + "-" * width + "|"]
    lines += ["|" + f" {name:<30}|{cur:>21} |{peak:>19} " + "|" for name, cur, peak in rows]
    lines += ["|" + "-" * width + "|",
              "|" + f" Allocs from the device: {stats['num_device_alloc']:<8} frees: {stats['num_device_free']:<8} "
              f"retries: {stats['num_alloc_retries']:<6} OOMs: {stats['num_ooms']}".ljust(width)[:width] + "|",
              "|" + "=" * width + "|"]
    return "\n".join(lines)
