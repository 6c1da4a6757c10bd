"""torch.serialization: the globals a weights-only load (trainrun.load's default, PyTorch 2.6's) may meet besides
tensors and plain containers: add_safe_globals([numpy.dtype, MyConfig]), the safe_globals(...) context manager,
get_safe_globals and clear_safe_globals. save and load are trainrun.save and trainrun.load."""
import contextlib

from trainrun import _torch_checkpoint


def _key(obj):
    if isinstance(obj, tuple):  # (object, "module.name") as PyTorch also takes
        obj, name = obj
        module, _, short = name.rpartition(".")
        return (module, short), obj
    return (obj.__module__, obj.__qualname__), obj


def add_safe_globals(safe_globals):
    for entry in safe_globals:
        key, obj = _key(entry)
        _torch_checkpoint.SAFE_GLOBALS[key] = obj
        # A function a layer above wrapped (DTensor dispatches nn.functional's): its original is what a
        # pickle of a module holding it names.
        inner = getattr(obj, "__wrapped__", None)
        while inner is not None and not isinstance(entry, tuple):
            _torch_checkpoint.SAFE_GLOBALS[_key(inner)[0]] = inner
            inner = getattr(inner, "__wrapped__", None)


def get_safe_globals():
    return list(_torch_checkpoint.SAFE_GLOBALS.values())


def clear_safe_globals():
    _torch_checkpoint.SAFE_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    saved = dict(_torch_checkpoint.SAFE_GLOBALS)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _torch_checkpoint.SAFE_GLOBALS.clear()
        _torch_checkpoint.SAFE_GLOBALS.update(saved)


def __getattr__(name):
    if name in ("save", "load"):
        import trainrun
        return getattr(trainrun, name)
    raise AttributeError(f"module 'trainrun.serialization' has no attribute '{name}'")
