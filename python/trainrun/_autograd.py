"""Grad mode: no_grad / enable_grad as context managers and decorators, as
PyTorch's. The mode is per thread, like PyTorch's."""
import functools

from trainrun import _C

is_grad_enabled = _C.is_grad_enabled


class _GradMode:
    enabled = True

    def __enter__(self):
        self._previous = _C.is_grad_enabled()
        _C.set_grad_enabled(self.enabled)
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):  # noqa: N801  (PyTorch's name)
    """Ops inside record no graph."""
    enabled = False


class enable_grad(_GradMode):  # noqa: N801
    """Ops inside record the graph again (within a no_grad)."""
    enabled = True


class set_grad_enabled(_GradMode):  # noqa: N801
    def __init__(self, mode):
        self.enabled = bool(mode)
        self._previous = _C.is_grad_enabled()
        _C.set_grad_enabled(self.enabled)  # takes effect at once, as PyTorch's

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._previous)
        return False
