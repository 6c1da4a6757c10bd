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

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "increment_version", "Node"]


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


def __getattr__(name):
    if name == "Node":  # (tensor.grad_fn's class)
        from trainrun._tensor_extras import GradFn
        return GradFn
    raise AttributeError(f"module 'trainrun.autograd.graph' has no attribute '{name}'")
