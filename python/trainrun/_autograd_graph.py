"""torch.autograd.graph: hooks on what autograd saves for backward.

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = model(x)          # each tensor a node saves goes through pack(tensor) -> anything
    loss.backward()              # ... and comes back through unpack(that) -> tensor

save_on_cpu() keeps saved tensors on the CPU (pinned when asked) and moves them back for backward;
disable_saved_tensors_hooks(message) refuses saving under it. The innermost active hooks apply; a node keeps the
hooks it saved with. (trainrun.compile's recorded programs keep their own saved tensors: hooks do not see
those.)"""
import contextlib

from trainrun import _C

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "increment_version", "Node",
           "register_multi_grad_hook"]


class saved_tensors_hooks:  # noqa: N801  (PyTorch's name)
    """A context manager under which every tensor saved for backward is pack_hook(tensor), and backward gets
    unpack_hook(what pack returned) back. The hooks must not modify their argument in place."""

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks: pack_hook and unpack_hook must be callable")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        _C._push_saved_tensors_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        _C._pop_saved_tensors_hooks()


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Saved tensors are kept on the CPU (in pinned memory with pin_memory=True) and moved back to their
    device for backward: GPU memory traded for transfers."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            if t.device.type == "cpu":
                return (t.device, t)
            cpu = t.detach().to("cpu")
            if pin_memory:
                cpu = cpu.pin_memory()
            return (t.device, cpu)

        def unpack(packed):
            device, t = packed
            return t if t.device == device else t.to(device, non_blocking=pin_memory)

        super().__init__(pack, unpack)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Under it, saving a tensor for backward raises RuntimeError(error_message) (for code that must not run
    under someone's hooks)."""
    _C._push_saved_tensors_hooks_disabled(str(error_message))
    try:
        yield
    finally:
        _C._pop_saved_tensors_hooks()


def increment_version(tensor):
    """Marks tensor as modified in place (autograd then refuses a backward that saved it before)."""
    tensors = tensor if isinstance(tensor, (list, tuple)) else [tensor]
    for t in tensors:
        _C._unsafe_set_version(t, t._version + 1)


class _MultiGradHook:
    """The state of one register_multi_grad_hook over one backward pass at a time."""

    def __init__(self, tensors, fn, mode):
        self.fn, self.mode, self.count = fn, mode, len(tensors)
        self.grads, self.fired, self.armed = [None] * len(tensors), False, False
        self.handles = [t.register_hook(self._hook_for(i)) for i, t in enumerate(tensors)]

    def _reset(self):
        self.grads, self.fired, self.armed = [None] * self.count, False, False

    def _arm(self):
        """The first gradient of a backward pass: the state resets when the pass ends (and in "all" mode the
        hook runs then, with None for the tensors that got no gradient, if it has not run already)."""
        if not self.armed:
            self.armed = True
            _C._queue_callback(self._end_of_backward)

    def _end_of_backward(self):
        if self.mode == "all" and not self.fired:
            self.fired = True
            self.fn(tuple(self.grads))
        self._reset()

    def _hook_for(self, index):
        def hook(grad):
            self._arm()
            if self.mode == "any":
                if not self.fired:
                    self.fired = True
                    self.fn(grad)
                return None
            self.grads[index] = grad
            if not self.fired and all(g is not None for g in self.grads):
                self.fired = True
                self.fn(tuple(self.grads))
            return None
        return hook


class _MultiHandle:
    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """fn over the gradients of several tensors, once per backward pass: mode "all" calls fn(grads) (a tuple,
    None where a tensor got no gradient) when every tensor's gradient is known, or when the pass ends if some
    get none; mode "any" calls fn(grad) with the first gradient computed. Returns a handle whose remove() takes
    the hooks off."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = list(tensors)
    if not all(_C._is_cpp_tensor(t) and t.requires_grad for t in tensors):
        raise RuntimeError("register_multi_grad_hook: every tensor must require grad")
    return _MultiHandle(_MultiGradHook(tensors, fn, mode).handles)


def __getattr__(name):
    if name == "Node":  # (tensor.grad_fn's class)
        from trainrun._tensor_extras import GradFn
        return GradFn
    raise AttributeError(f"module 'trainrun.autograd.graph' has no attribute '{name}'")
