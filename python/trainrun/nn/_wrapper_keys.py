"""State dict keys of wrapper modules (the activation-checkpoint wrapper, FSDP1's wrapper): the wrapper holds
its module as one child, and its state dict reads as the wrapped module's, without that child's name, as
PyTorch's wrappers do; loading puts the name back."""


def hide_child_name(wrapper, child_name):
    """Registers the state dict hooks on wrapper that leave `child_name.` out of its keys."""
    inner = child_name + "."

    def strip(module, state_dict, prefix, *args):
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

    wrapper._register_state_dict_hook(strip)
    wrapper._register_load_state_dict_pre_hook(add, with_module=False)


def named_without_child(named, child_name):
    """(name, tensor) pairs of named_parameters/named_buffers with `child_name.` left out of the names."""
    for name, tensor in named:
        yield name.replace(child_name + ".", ""), tensor
