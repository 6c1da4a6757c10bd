"""Optimizer step hooks, as PyTorch's: optimizer.register_step_pre_hook(hook) -> hook(optimizer, args, kwargs)
before each step (it may return new (args, kwargs)), register_step_post_hook(hook) -> hook(optimizer, args,
kwargs) after it, and torch.optim.optimizer.register_optimizer_step_pre_hook/post_hook for every optimizer
(global pre hooks first, global post hooks last). Each returns a handle whose remove() unregisters the hook."""
import functools

from trainrun.utils.hooks import RemovableHandle

_GLOBAL_PRE, _GLOBAL_POST = {}, {}


def _add(table, hook):
    handle = RemovableHandle(table)
    table[handle.id] = hook
    return handle


def register_optimizer_step_pre_hook(hook):
    return _add(_GLOBAL_PRE, hook)


def register_optimizer_step_post_hook(hook):
    return _add(_GLOBAL_POST, hook)


def register_step_pre_hook(self, hook):
    return _add(self.__dict__.setdefault("_step_pre_hooks", {}), hook)


def register_step_post_hook(self, hook):
    return _add(self.__dict__.setdefault("_step_post_hooks", {}), hook)


def with_hooks(step):
    """step wrapped to run the pre hooks, then step, then the post hooks."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        pre = list(_GLOBAL_PRE.values()) + list(self.__dict__.get("_step_pre_hooks", {}).values())
        for hook in pre:
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), but got "
                                       f"{result}.")
                args, kwargs = result
        out = step(self, *args, **kwargs)
        for hook in list(self.__dict__.get("_step_post_hooks", {}).values()) + list(_GLOBAL_POST.values()):
            hook(self, args, kwargs)
        return out
    return wrapper
