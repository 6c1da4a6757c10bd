"""torch.utils.hooks.RemovableHandle: what every register_*_hook returns (modules', tensors' state_dict and
optimizers' step hooks); .remove() takes the hook off its table, also as a context manager."""
import itertools


class RemovableHandle:
    _ids = itertools.count()

    def __init__(self, hooks):
        self._hooks, self.id = hooks, next(RemovableHandle._ids)

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
