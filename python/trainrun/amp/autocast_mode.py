"""autocast: a context manager (and decorator) that switches this thread's
mixed precision on or off for one device type, restoring the previous state
on exit, so autocast regions nest (an inner enabled=False region runs in
full precision)."""
import functools
import warnings

import trainrun
from trainrun import _C

_DEFAULT_DTYPES = {"cpu": "bfloat16", "cuda": "float16"}


def is_autocast_available(device_type):
    return device_type in _DEFAULT_DTYPES


def is_autocast_enabled(device_type="cuda"):
    return _C._get_autocast(device_type)[0]


def get_autocast_dtype(device_type):
    enabled, dtype = _C._get_autocast(device_type)
    return dtype if enabled else getattr(trainrun, _DEFAULT_DTYPES[device_type])


class autocast:
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected `device_type` of type `str`, got: `{type(device_type)}`")
        device_type = device_type.split(":")[0]
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}' (trainrun has "
                               "autocast for 'cpu' and 'cuda')")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else getattr(trainrun, _DEFAULT_DTYPES[device_type])
        if self.fast_dtype not in (trainrun.bfloat16, trainrun.float16):
            if enabled:
                warnings.warn(f"In {device_type} autocast, but the target dtype is not supported. Disabling autocast."
                              f"\n{device_type} Autocast only supports dtypes of torch.bfloat16 and torch.float16 "
                              "currently.")
            enabled = False
        if device_type == "cuda" and enabled and not trainrun.cuda.is_available():
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
            enabled = False
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled

    def __enter__(self):
        self._previous = _C._get_autocast(self.device)
        _C._set_autocast(self.device, self._enabled, self.fast_dtype)
        return self

    def __exit__(self, *exc):
        _C._set_autocast(self.device, *self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapped
