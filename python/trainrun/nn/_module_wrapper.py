"""Wrapper modules (the activation-checkpoint wrapper, FSDP1's FullyShardedDataParallel): the wrapper holds its
module as one child and is otherwise transparent, as PyTorch's wrappers are. Its state dict reads as the wrapped
module's, without the child's name (loading puts the name back); its parameter and buffer names leave the name
out too; attributes and indexing it lacks are the wrapped module's."""
from trainrun.nn._module import Module


class ModuleWrapper(Module):
    """Subclasses name the child (_child_name) and call _wrap(module) in __init__."""

    _child_name = None

    def _wrap(self, module):
        setattr(self, self._child_name, module)
        inner = self._child_name + "."

        def strip(owner, state_dict, prefix, *args):
            hidden = prefix + inner
            items = [(prefix + key[len(hidden):] if key.startswith(hidden) else key, value)
                     for key, value in state_dict.items()]
            state_dict.clear()  # (rebuilt in place: each key keeps its position)
            state_dict.update(items)
            return state_dict

        def add(state_dict, prefix, *args):
            for key in list(state_dict):
                if key.startswith(prefix) and not key.startswith(prefix + inner):
                    state_dict[prefix + inner + key[len(prefix):]] = state_dict.pop(key)

        self._register_state_dict_hook(strip)
        self._register_load_state_dict_pre_hook(add, with_module=False)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == self._child_name:  # (not wrapped yet)
                raise
            return getattr(getattr(self, self._child_name), name)

    def __getitem__(self, key):
        return getattr(self, self._child_name).__getitem__(key)

    def _without_child(self, named):
        for name, tensor in named:
            yield name.replace(self._child_name + ".", ""), tensor

    def named_parameters(self, *args, **kwargs):
        return self._without_child(super().named_parameters(*args, **kwargs))

    def named_buffers(self, *args, **kwargs):
        return self._without_child(super().named_buffers(*args, **kwargs))
