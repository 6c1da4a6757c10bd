"""More of torch's top level, for device-agnostic and older scripts: torch.accelerator (PyTorch 2.6's
device-agnostic queries, over trainrun.cuda), get_device_module, the autocast state functions
(get_autocast_dtype, is_autocast_cpu_enabled, set_autocast_enabled, ...), torch.GradScaler and
torch.OutOfMemoryError, torch.range (deprecated: its end is included), unravel_index, rms_norm, the
conj/neg/inference queries as functions, svd_lowrank / pca_lowrank (randomized, Halko et al.), and the
anomaly / deterministic debug switches."""
import types
import warnings

import trainrun
from trainrun import _C


def _accelerator_module():
    cuda = trainrun.cuda
    module = types.ModuleType("trainrun.accelerator", "torch.accelerator: the current accelerator (CUDA here)")
    module.is_available = cuda.is_available
    module.device_count = lambda: cuda.device_count() if cuda.is_available() else 0
    module.current_accelerator = lambda: trainrun.device("cuda") if cuda.is_available() else None
    module.current_device_index = lambda: cuda.current_device() if cuda.is_available() else -1
    module.current_device_idx = module.current_device_index
    module.set_device_index = lambda device: cuda.set_device(device) if device is not None else None
    module.set_device_idx = module.set_device_index
    module.synchronize = lambda device=None: cuda.synchronize() if cuda.is_available() else None
    return module


def get_device_module(device=None):
    """The module of a device type: trainrun.cuda for "cuda", trainrun.cpu for "cpu"."""
    kind = "cuda" if device is None and trainrun.cuda.is_available() else \
        ("cpu" if device is None else (device if isinstance(device, str) else device.type).split(":")[0])
    modules = {"cuda": trainrun.cuda, "cpu": trainrun.cpu}
    if kind not in modules:
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered as 'torch.{kind}'.")
    return modules[kind]


# ---- autocast's state, as functions ----------------------------------------------------------------------------
def _set_autocast(device_type, enabled=None, dtype=None):
    on, _ = _C._get_autocast(device_type)
    current = trainrun.amp.get_autocast_dtype(device_type)  # (the device's default low precision while off)
    _C._set_autocast(device_type, on if enabled is None else bool(enabled), current if dtype is None else dtype)


def get_autocast_dtype(device_type):
    return trainrun.amp.get_autocast_dtype(device_type)


def set_autocast_dtype(device_type, dtype):
    _set_autocast(device_type, dtype=dtype)


def is_autocast_enabled(device_type=None):
    return trainrun.amp.is_autocast_enabled("cuda" if device_type is None else device_type)


def set_autocast_enabled(device_type, enabled=None):
    if enabled is None:  # (the old one-argument form: CUDA's)
        device_type, enabled = "cuda", device_type
    _set_autocast(device_type, enabled=enabled)


# ---- small functions -------------------------------------------------------------------------------------------
def torch_range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """torch.range: deprecated in PyTorch; unlike arange its end is included. Floats by default."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    count = int((end - start) // step) + 1
    values = trainrun.arange(count, dtype=trainrun.float64) * step + start
    out_ = values.to(dtype if dtype is not None else trainrun.get_default_dtype())
    return out_.requires_grad_(True) if requires_grad else out_


def unravel_index(indices, shape):
    """The coordinates (a tuple, one tensor per dim) of flat indices into a tensor of `shape` (row-major)."""
    if not _C._is_cpp_tensor(indices):
        indices = trainrun.tensor(indices)
    if indices.is_floating_point() or indices.dtype == trainrun.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = [shape] if isinstance(shape, int) else list(shape)
    total = 1
    for size in shape:
        total *= size
    rest = indices.long() % total  # (negative and too-large indices wrap around, as PyTorch 2.6's)
    coordinates = []
    for size in reversed(shape):
        coordinates.append(rest % size)
        rest = rest // size
    return tuple(reversed(coordinates))


def svd_lowrank(A, q=6, niter=2, M=None):  # noqa: N803
    """A rank-q approximate SVD of A - M by randomized subspace iteration (Halko, Martinsson and Tropp):
    (U, S, V) with A ~ U diag(S) V^T."""
    X = A - M if M is not None else A  # noqa: N806
    m, n = X.shape[-2], X.shape[-1]
    q = min(q, m, n)
    sketch = trainrun.randn(list(X.shape[:-2]) + [n, q], dtype=X.dtype)
    Q = trainrun.linalg.qr(X @ sketch).Q  # noqa: N806
    for _ in range(niter):
        Q = trainrun.linalg.qr(X.transpose(-2, -1) @ Q).Q  # noqa: N806
        Q = trainrun.linalg.qr(X @ Q).Q  # noqa: N806
    B = Q.transpose(-2, -1) @ X  # noqa: N806
    U, S, Vh = trainrun.linalg.svd(B, full_matrices=False)  # noqa: N806
    return Q @ U, S, Vh.transpose(-2, -1)


def pca_lowrank(A, q=None, center=True, niter=2):  # noqa: N803
    """Principal components of A's rows: svd_lowrank of A centred on its column means."""
    m, n = A.shape[-2], A.shape[-1]
    q = min(6, m, n) if q is None else q
    mean = A.mean(-2, keepdim=True) if center else None
    return svd_lowrank(A, q, niter, mean)


_deterministic_debug_mode = [0]


def set_deterministic_debug_mode(debug_mode):
    modes = {"default": 0, "warn": 1, "error": 2}
    value = modes.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else int(debug_mode)
    if value not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                           f"{debug_mode}")
    _deterministic_debug_mode[0] = value
    trainrun.use_deterministic_algorithms(value > 0, warn_only=value == 1)


def get_deterministic_debug_mode():
    return _deterministic_debug_mode[0]


def install(namespace):
    import sys
    accelerator = _accelerator_module()
    sys.modules["trainrun.accelerator"] = accelerator
    extra = {
        "accelerator": accelerator, "get_device_module": get_device_module,
        "get_autocast_dtype": get_autocast_dtype, "set_autocast_dtype": set_autocast_dtype,
        "is_autocast_enabled": is_autocast_enabled, "set_autocast_enabled": set_autocast_enabled,
        "is_autocast_cpu_enabled": lambda: is_autocast_enabled("cpu"),
        "set_autocast_cpu_enabled": lambda enabled: set_autocast_enabled("cpu", enabled),
        "get_autocast_cpu_dtype": lambda: get_autocast_dtype("cpu"),
        "set_autocast_cpu_dtype": lambda dtype: set_autocast_dtype("cpu", dtype),
        "get_autocast_gpu_dtype": lambda: get_autocast_dtype("cuda"),
        "set_autocast_gpu_dtype": lambda dtype: set_autocast_dtype("cuda", dtype),
        "GradScaler": trainrun.amp.GradScaler, "OutOfMemoryError": trainrun.cuda.OutOfMemoryError,
        "range": torch_range, "unravel_index": unravel_index, "svd_lowrank": svd_lowrank,
        "pca_lowrank": pca_lowrank, "newaxis": None,
        "rms_norm": trainrun.nn.functional.rms_norm,
        "is_conj": lambda input: input.is_conj(), "is_neg": lambda input: input.is_neg(),  # noqa: A002
        "resolve_conj": lambda input: input.resolve_conj(), "resolve_neg": lambda input: input.resolve_neg(),
        "is_inference": lambda input: input.is_inference(), "get_device": lambda input: input.get_device(),
        "set_anomaly_enabled": lambda enabled, check_nan=True: trainrun.autograd.set_detect_anomaly(
            enabled, check_nan),
        "set_deterministic_debug_mode": set_deterministic_debug_mode,
        "get_deterministic_debug_mode": get_deterministic_debug_mode,
    }
    for name, value in extra.items():
        if name not in namespace:
            namespace[name] = value


def _absent_device_module(name, label):
    """torch.mps / torch.xpu on a machine without that device: the queries answer "none here" and the rest
    raise naming the device, as PyTorch's do on a build without it."""
    module = types.ModuleType(f"trainrun.{name}", f"torch.{name}: {label}, which trainrun does not drive")
    module.is_available = lambda: False
    module.device_count = lambda: 0
    module.is_initialized = lambda: False

    def unavailable(*args, **kwargs):
        raise RuntimeError(f"torch.{name}: no {label} device is available (trainrun drives CPUs and CUDA GPUs)")
    for fn in ("synchronize", "current_device", "set_device", "get_rng_state", "set_rng_state",
               "current_allocated_memory", "memory_allocated"):
        setattr(module, fn, unavailable)
    for fn in ("manual_seed", "manual_seed_all", "seed", "seed_all", "empty_cache"):  # (PyTorch's are silent too)
        setattr(module, fn, lambda *args, **kwargs: None)
    return module


def install_generic_streams(namespace):
    from trainrun._generic_streams import Event, Stream
    namespace["Stream"], namespace["Event"] = Stream, Event


def install_absent_devices(namespace):
    import sys
    for name, label in (("mps", "Apple's Metal (MPS)"), ("xpu", "Intel's XPU")):
        module = _absent_device_module(name, label)
        sys.modules[module.__name__] = module
        namespace[name] = module
