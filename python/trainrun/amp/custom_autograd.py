"""torch.amp.custom_fwd / custom_bwd: decorators for a custom autograd.Function's forward and backward under
autocast. custom_fwd(cast_inputs=dtype) runs forward with autocast off and its floating-point tensor inputs cast
to dtype (when autocast is on for the device); without cast_inputs forward runs under the caller's autocast
state, which custom_bwd then restores for backward, so both passes compute in the same precision."""
import functools

from trainrun import _C
from trainrun.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled


def _cast(value, dtype):
    if _C._is_cpp_tensor(value) and value.is_floating_point():
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_on = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_on:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast(args, cast_inputs), **_cast(kwargs, cast_inputs))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=getattr(ctx, "_fwd_used_autocast", False),
                      dtype=getattr(ctx, "_dtype", None) or get_autocast_dtype(device_type)):
            return bwd(*args, **kwargs)
    return decorate_bwd
