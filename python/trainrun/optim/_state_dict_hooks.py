"""Optimizer state-dict hooks, as PyTorch's (2.1+): register_state_dict_pre_hook(hook) -> hook(optimizer)
before state_dict(); register_state_dict_post_hook(hook) -> hook(optimizer, state_dict), which may return a new
state dict; register_load_state_dict_pre_hook(hook) -> hook(optimizer, state_dict), which may return the state
dict to load instead; register_load_state_dict_post_hook(hook) -> hook(optimizer) after loading. prepend=True
runs a hook before the ones already registered. Each returns a handle whose remove() unregisters it."""
import collections
import functools

from trainrun.utils.hooks import RemovableHandle


def _register(self, table_name, hook, prepend):
    table = self.__dict__.setdefault(table_name, collections.OrderedDict())
    handle = RemovableHandle(table)
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


def _hooks(self, table_name):
    return list(self.__dict__.get(table_name, {}).values())


def register_state_dict_pre_hook(self, hook, prepend=False):
    return _register(self, "_state_dict_pre_hooks", hook, prepend)


def register_state_dict_post_hook(self, hook, prepend=False):
    return _register(self, "_state_dict_post_hooks", hook, prepend)


def register_load_state_dict_pre_hook(self, hook, prepend=False):
    return _register(self, "_load_state_dict_pre_hooks", hook, prepend)


def register_load_state_dict_post_hook(self, hook, prepend=False):
    return _register(self, "_load_state_dict_post_hooks", hook, prepend)


def with_state_dict_hooks(state_dict):
    """state_dict() wrapped in the pre and post hooks (run once, for the outermost call of an override)."""
    @functools.wraps(state_dict)
    def wrapper(self, *args, **kwargs):
        if self.__dict__.get("_in_state_dict_hooks"):
            return state_dict(self, *args, **kwargs)
        self.__dict__["_in_state_dict_hooks"] = True
        try:
            for hook in _hooks(self, "_state_dict_pre_hooks"):
                hook(self)
            out = state_dict(self, *args, **kwargs)
            for hook in _hooks(self, "_state_dict_post_hooks"):
                result = hook(self, out)
                out = result if result is not None else out
            return out
        finally:
            self.__dict__["_in_state_dict_hooks"] = False
    return wrapper


def with_load_state_dict_hooks(load_state_dict):
    """load_state_dict(state_dict) wrapped in the pre and post hooks."""
    @functools.wraps(load_state_dict)
    def wrapper(self, state_dict, *args, **kwargs):
        if self.__dict__.get("_in_load_state_dict_hooks"):
            return load_state_dict(self, state_dict, *args, **kwargs)
        self.__dict__["_in_load_state_dict_hooks"] = True
        try:
            for hook in _hooks(self, "_load_state_dict_pre_hooks"):
                result = hook(self, state_dict)
                state_dict = result if result is not None else state_dict
            out = load_state_dict(self, state_dict, *args, **kwargs)
            for hook in _hooks(self, "_load_state_dict_post_hooks"):
                hook(self)
            return out
        finally:
            self.__dict__["_in_load_state_dict_hooks"] = False
    return wrapper


def install(cls):
    """The four register methods on cls, and its own state_dict/load_state_dict wrapped."""
    cls.register_state_dict_pre_hook = register_state_dict_pre_hook
    cls.register_state_dict_post_hook = register_state_dict_post_hook
    cls.register_load_state_dict_pre_hook = register_load_state_dict_pre_hook
    cls.register_load_state_dict_post_hook = register_load_state_dict_post_hook
    wrap_overrides(cls)


def wrap_overrides(cls):
    """A subclass's own state_dict/load_state_dict runs the hooks too."""
    if "state_dict" in cls.__dict__:
        cls.state_dict = with_state_dict_hooks(cls.__dict__["state_dict"])
    if "load_state_dict" in cls.__dict__:
        cls.load_state_dict = with_load_state_dict_hooks(cls.__dict__["load_state_dict"])
