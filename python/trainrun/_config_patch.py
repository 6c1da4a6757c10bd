"""`config.patch(...)` for trainrun._dynamo.config and trainrun._inductor.config, as PyTorch's config modules have
it: set some settings for a `with` block or a decorated function, then put the old values back."""
import contextlib


class ConfigPatch(contextlib.ContextDecorator):
    def __init__(self, module, changes):
        self._module, self._changes, self._saved = module, changes, []

    def _owner(self, name):
        """The object holding a (maybe dotted: "triton.cudagraphs") setting, and its last name."""
        owner, *path = [self._module] + name.split(".")
        for part in path[:-1]:
            owner = getattr(owner, part)
        if not hasattr(owner, path[-1]):
            raise AttributeError(f"{self._module.__name__}.{name} does not exist")
        return owner, path[-1]

    def __enter__(self):
        try:
            for name, value in self._changes.items():
                owner, attr = self._owner(name)
                self._saved.append((owner, attr, getattr(owner, attr)))
                setattr(owner, attr, value)
        except AttributeError:
            self.__exit__(None, None, None)  # (the settings set before the unknown one go back too)
            raise
        return self

    def __exit__(self, *exc):
        while self._saved:
            owner, attr, value = self._saved.pop()
            setattr(owner, attr, value)
        return False


def patcher(module):
    """The module's patch(arg1=None, arg2=None, **changes): PyTorch's forms patch("name", value), patch({...}) and
    patch(name=value)."""
    def patch(arg1=None, arg2=None, **changes):
        if isinstance(arg1, str):
            changes = {arg1: arg2, **changes}
        elif isinstance(arg1, dict):
            changes = {**arg1, **changes}
        elif arg1 is not None:
            raise TypeError(f"patch: expected a setting's name, a dict or keywords, got {type(arg1).__name__}")
        return ConfigPatch(module, changes)

    patch.__doc__ = f"Sets {module.__name__}'s settings for a `with` block or a decorated function."
    return patch
