"""torch.autograd.detect_anomaly / set_detect_anomaly. trainrun's engine does not yet record which forward
op made each backward node, so the check is at the ends of the pass: with anomaly mode on (and check_nan),
a backward from a NaN or infinite root (the loss), and a gradient that comes out NaN (autograd.grad's results,
and the .grad of the tensors backward(inputs=...) names), raise RuntimeError naming which."""
import warnings

STATE = {"enabled": False, "check_nan": True}


def is_anomaly_enabled():
    return STATE["enabled"]


def is_anomaly_check_nan_enabled():
    return STATE["check_nan"]


class set_detect_anomaly:  # noqa: N801  (PyTorch's name)
    """Turns anomaly mode on or off now (a call), or for a with block (restored after)."""

    def __init__(self, mode, check_nan=True):
        self.previous = dict(STATE)
        STATE.update(enabled=bool(mode), check_nan=bool(check_nan))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.update(self.previous)
        return False


class detect_anomaly:  # noqa: N801
    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)
        self.previous = dict(STATE)
        STATE.update(enabled=True, check_nan=self.check_nan)
        return self

    def __exit__(self, *exc):
        STATE.update(self.previous)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapped


def check_roots(tensors, what):
    if not (STATE["enabled"] and STATE["check_nan"]):
        return
    for i, t in enumerate(tensors):
        if t.is_floating_point() and not bool(t.detach().isfinite().all()):
            raise RuntimeError(f"{what}: root {i} of the backward pass (shape {list(t.shape)}) has NaN or infinite "
                               "values (anomaly mode)")


def check_gradients(grads, what):
    if not (STATE["enabled"] and STATE["check_nan"]):
        return
    for i, g in enumerate(grads):
        if g is not None and g.is_floating_point() and bool(g.detach().isnan().any()):
            raise RuntimeError(f"{what}: the gradient of input {i} (shape {list(g.shape)}) has NaN values "
                               "(anomaly mode)")
