"""Module state_dict and load_state_dict hooks, as PyTorch's (checkpoint key renames, formats of libraries):

- register_state_dict_pre_hook(hook): hook(module, prefix, keep_vars) before the module's entries are saved;
- register_state_dict_post_hook(hook) / _register_state_dict_hook(hook): hook(module, state_dict, prefix,
  local_metadata) after them, changing the dict in place (the private form may return a new dict);
- register_load_state_dict_pre_hook(hook): hook(module, state_dict, prefix, local_metadata, strict,
  missing_keys, unexpected_keys, error_msgs), and _register_load_state_dict_pre_hook(hook, with_module=False)
  without the module first: before loading, free to rename or drop keys;
- register_load_state_dict_post_hook(hook): hook(module, incompatible_keys) after loading, free to clear keys
  from incompatible_keys.missing_keys/unexpected_keys (strict then judges what is left).

Each returns a handle whose remove() unregisters the hook. Submodules' hooks run with their prefixes: state_dict
post hooks children first, as PyTorch's recursion does."""
from trainrun import _C
from trainrun.nn._module_hooks import _add_hook


def _add(module, kind, hook):
    return _add_hook(module, kind, hook, prepend=False)


def _hooks(module, kind):
    return list(module.__dict__.get(kind, {}).values())


def _with_prefixes(module, prefix, children_first=False):
    """(submodule, its key prefix) for module and every submodule: parents first, or children first."""
    pairs = [(m, prefix + (name + "." if name else "")) for name, m in module.named_modules()]
    return list(reversed(pairs)) if children_first else pairs


def run_state_dict_pre_hooks(module, prefix, keep_vars):
    for m, p in _with_prefixes(module, prefix):
        for hook in _hooks(m, "_state_dict_pre_hooks_py"):
            hook(m, p, keep_vars)


def run_state_dict_post_hooks(module, destination, prefix):
    for m, p in _with_prefixes(module, prefix, children_first=True):
        for hook, legacy in _hooks(m, "_state_dict_hooks_py"):
            result = hook(m, destination, p, {})
            if result is not None:
                if not legacy:
                    raise RuntimeError("state_dict post-hook must return None")
                destination = result
    return destination


def run_load_pre_hooks(module, state_dict, strict, missing, unexpected, errors):
    for m, p in _with_prefixes(module, ""):
        for hook, with_module in _hooks(m, "_load_state_dict_pre_hooks_py"):
            args = (state_dict, p, {}, strict, missing, unexpected, errors)
            hook(m, *args) if with_module else hook(*args)


def run_load_post_hooks(module, incompatible):
    for m, _ in _with_prefixes(module, ""):
        for hook in _hooks(m, "_load_state_dict_post_hooks_py"):
            if hook(m, incompatible) is not None:
                raise RuntimeError("load_state_dict post-hook must return None")


def install():
    M = _C.nn.Module
    M.register_state_dict_pre_hook = lambda self, hook: _add(self, "_state_dict_pre_hooks_py", hook)
    M.register_state_dict_post_hook = lambda self, hook: _add(self, "_state_dict_hooks_py", (hook, False))
    M._register_state_dict_hook = lambda self, hook: _add(self, "_state_dict_hooks_py", (hook, True))
    M.register_load_state_dict_pre_hook = lambda self, hook: _add(self, "_load_state_dict_pre_hooks_py",
                                                                  (hook, True))
    M._register_load_state_dict_pre_hook = lambda self, hook, with_module=False: _add(
        self, "_load_state_dict_pre_hooks_py", (hook, with_module))
    M.register_load_state_dict_post_hook = lambda self, hook: _add(self, "_load_state_dict_post_hooks_py", hook)
