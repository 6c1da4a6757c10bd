"""ModuleTracker, as torch.utils.module_tracker: which modules the running code is inside, forward and backward.

    with ModuleTracker() as tracker:
        model(x).sum().backward()   # inside a hook or op: tracker.parents == {"Global", "Net", "Net.fc1"}

A module's name is its class name for the first module seen and "parent.child" for the modules below it.
Forward: a module is a parent from its forward pre-hook to its forward hook (every module's hooks:
register_module_forward_pre_hook). Backward: from when its outputs' gradients are known (a full backward
pre-hook) until its inputs' are (a full backward hook); when none of its inputs needs a gradient (the first
layer of a model), it stays a parent until the next forward begins, so its weights' gradients count as its own.
Every change is also logged with the profiler's clock (`transitions`), which the FLOP counter uses to place the
ops it reads back from the profiler."""
import weakref

from trainrun import _C

__all__ = ["ModuleTracker"]


class ModuleTracker:
    def __init__(self):
        self.parents = {"Global"}
        self._known_modules = weakref.WeakKeyDictionary()
        self._in_backward = {}  # name -> how many backward scopes of it are open
        self._handles = []
        self.transitions = []  # (profiler clock ns, name, +1 entered / -1 left)

    @property
    def is_bw(self):
        """Whether the tracked code is in a backward pass now."""
        return bool(self._in_backward)

    def _get_mod_name(self, mod):
        if mod not in self._known_modules:
            self._known_modules[mod] = type(mod).__name__
        name = self._known_modules[mod]
        for child_name, child in mod.named_children():
            if child not in self._known_modules:
                self._known_modules[child] = f"{name}.{child_name}"
                self._get_mod_name(child)
        return name

    def _enter(self, name):
        self.parents.add(name)
        self.transitions.append((_C._profiler_now_ns(), name, 1))

    def _leave(self, name):
        self.parents.discard(name)
        self.transitions.append((_C._profiler_now_ns(), name, -1))

    def _close_backward(self):
        for name in list(self._in_backward):
            self._leave(name)
        self._in_backward.clear()

    def _fw_pre_hook(self, mod, args):
        if self._in_backward:  # a new forward: what the last backward left open is over
            self._close_backward()
        self._enter(self._get_mod_name(mod))

    def _fw_post_hook(self, mod, args, output):
        self._leave(self._get_mod_name(mod))

    def _bw_pre_hook(self, mod, grad_output):
        name = self._get_mod_name(mod)
        if name not in self._in_backward:
            self._enter(name)
        self._in_backward[name] = self._in_backward.get(name, 0) + 1

    def _bw_hook(self, mod, grad_input, grad_output):
        if all(g is None for g in grad_input):
            return  # no input needed a gradient: its weights' gradients come after this (see the module doc)
        name = self._get_mod_name(mod)
        count = self._in_backward.get(name, 0) - 1
        if count <= 0:
            self._in_backward.pop(name, None)
            self._leave(name)
        else:
            self._in_backward[name] = count

    def __enter__(self):
        from trainrun.nn import _module_hooks as hooks
        self._handles = [hooks.register_module_forward_pre_hook(self._fw_pre_hook),
                         hooks.register_module_forward_hook(self._fw_post_hook),
                         hooks.register_module_full_backward_pre_hook(self._bw_pre_hook),
                         hooks.register_module_full_backward_hook(self._bw_hook)]
        return self

    def __exit__(self, *args):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._close_backward()
        return False
