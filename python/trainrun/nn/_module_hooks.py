"""Module hooks, as PyTorch's: the forward (pre-)hooks and full backward (pre-)hooks of one module (register_*
on nn.Module, kept in the module's hook tables) and the hooks on every module's calls
(torch.nn.modules.module.register_module_*: they run before the module's own). Adding or removing one moves the
state version (_state_version.py), so a compiled call records again with the hooks it must run. The backward
hooks run through nn/_backward_hooks.py."""
import collections

from trainrun.nn import _backward_hooks
from trainrun.nn._state_version import _state_changed
from trainrun.utils.hooks import RemovableHandle


def _hook_table(module, name):
    table = module.__dict__.get(name)
    if table is None:
        table = collections.OrderedDict()
        object.__setattr__(module, name, table)
    return table


class _ModuleHookHandle(RemovableHandle):
    """A module hook's handle: removing the hook changes the module's state, as adding it did (compiled calls
    record anew when the hooks they would run change: trainrun/_compile_guards.py)."""

    def remove(self):
        super().remove()
        _state_changed()


def _add_hook(module, table_name, entry, prepend):
    table = _hook_table(module, table_name)
    handle = _ModuleHookHandle(table)
    table[handle.id] = entry
    if prepend:
        table.move_to_end(handle.id, last=False)
    _state_changed()
    return handle


_HOOK_TABLES = ("_forward_pre_hooks_py", "_forward_hooks_py", "_backward_pre_hooks_py", "_backward_hooks_py")


def hooks_state(module):
    """Which hooks the module has (their handles' ids per table): part of what compiled calls guard on."""
    own = tuple(tuple(module.__dict__[t]) if t in module.__dict__ else () for t in _HOOK_TABLES)
    every_module = (tuple(_global_forward_pre_hooks), tuple(_global_forward_hooks),
                    *(tuple(table) for table in _backward_hooks.GLOBAL_HOOKS.values()))
    return own + every_module


def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
    """hook(module, args) -> None or new args (with_kwargs: hook(module, args, kwargs) -> None or (args, kwargs))."""
    return _add_hook(self, "_forward_pre_hooks_py", (hook, with_kwargs), prepend)


def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
    """hook(module, args, output) -> None or a new output (with_kwargs: hook(module, args, kwargs, output))."""
    return _add_hook(self, "_forward_hooks_py", (hook, with_kwargs), prepend)


def register_full_backward_pre_hook(self, hook, prepend=False):
    """hook(module, grad_output) -> None or new grad_output, when the gradients of the module's outputs are known
    (nn/_backward_hooks.py)."""
    return _add_hook(self, "_backward_pre_hooks_py", hook, prepend)


def register_full_backward_hook(self, hook, prepend=False):
    """hook(module, grad_input, grad_output) -> None or new grad_input, when the gradients of the module's positional
    inputs are known (None for an input that is not a tensor or needs none; nn/_backward_hooks.py)."""
    return _add_hook(self, "_backward_hooks_py", hook, prepend)


def register_backward_hook(self, hook):
    """PyTorch's deprecated module backward hook: registered here as a full backward hook (hook(module,
    grad_input, grad_output)), which is what PyTorch recommends it be replaced with."""
    return register_full_backward_hook(self, hook)


# Hooks on every module's calls (torch.nn.modules.module.register_module_forward_hook and friends): they run
# before the module's own, as PyTorch's. A module tracker or a FLOP counter registers them for a while.
_global_forward_pre_hooks = collections.OrderedDict()
_global_forward_hooks = collections.OrderedDict()


def _add_global_hook(table, entry):
    handle = _ModuleHookHandle(table)
    table[handle.id] = entry
    _state_changed()
    return handle


def register_module_forward_pre_hook(hook):
    """hook(module, args) -> None or new args, before every module's forward."""
    return _add_global_hook(_global_forward_pre_hooks, (hook, False))


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) -> None or a new output, after every module's forward."""
    return _add_global_hook(_global_forward_hooks, (hook, with_kwargs))


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) -> None or new grad_output, in every module's backward."""
    return _add_global_hook(_backward_hooks.GLOBAL_HOOKS["_backward_pre_hooks_py"], hook)


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) -> None or new grad_input, in every module's backward."""
    return _add_global_hook(_backward_hooks.GLOBAL_HOOKS["_backward_hooks_py"], hook)


def _with_global(own, global_table):
    if not global_table:
        return own
    merged = collections.OrderedDict(global_table)
    merged.update(own or {})
    return merged
