"""The per-device spellings PyTorch scripts use: trainrun.cuda.amp.autocast /
GradScaler and trainrun.cpu.amp.autocast (importable as modules, e.g.
`from trainrun.cuda.amp import autocast, GradScaler`)."""
import functools
import sys
import types

import trainrun
from trainrun.amp.autocast_mode import autocast, is_autocast_enabled
from trainrun.amp.grad_scaler import GradScaler


class _CudaAutocast(autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype=dtype if dtype is not None else trainrun.float16, enabled=enabled,
                         cache_enabled=cache_enabled)


class _CpuAutocast(autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cpu", dtype=dtype if dtype is not None else trainrun.bfloat16, enabled=enabled,
                         cache_enabled=cache_enabled)


class _CudaGradScaler(GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def install():
    _CudaAutocast.__name__ = _CpuAutocast.__name__ = "autocast"
    _CudaGradScaler.__name__ = "GradScaler"
    from trainrun.amp.custom_autograd import custom_bwd, custom_fwd
    trainrun.cuda.amp = _module("trainrun.cuda.amp", autocast=_CudaAutocast, GradScaler=_CudaGradScaler,
                                custom_fwd=functools.partial(custom_fwd, device_type="cuda"),
                                custom_bwd=functools.partial(custom_bwd, device_type="cuda"))
    from trainrun import cpu as _cpu  # noqa: F401  (loads trainrun.cpu)
    trainrun.cpu.amp = _module("trainrun.cpu.amp", autocast=_CpuAutocast, GradScaler=GradScaler)
    trainrun.autocast = autocast
    trainrun.is_autocast_enabled = is_autocast_enabled
