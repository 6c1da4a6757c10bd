"""Where new tensors go when a factory is given no device: PyTorch's
trainrun.set_default_device(d), get_default_device() and `with
trainrun.device("meta"):` (which builds a model's layers with shapes only, so
a model bigger than one process's memory can be sharded before it is
materialised). Per thread, as PyTorch's device context is; the factories and
the layers' constructors (also those written in C++) read it."""
import threading

from trainrun import _C

_entered = threading.local()  # the devices `with device(...)` replaced, innermost last


def set_default_device(device):
    """New tensors without device= go to `device` (None: back to the CPU)."""
    _C._set_default_device("cpu" if device is None else device)


def get_default_device():
    return _C._get_default_device()


def _enter(self):
    stack = getattr(_entered, "stack", None)
    if stack is None:
        stack = _entered.stack = []
    stack.append(_C._get_default_device())
    _C._set_default_device(self)
    return self


def _exit(self, *exc_info):
    _C._set_default_device(_entered.stack.pop())
    return False


_C.device.__enter__ = _enter
_C.device.__exit__ = _exit
