"""load_state_dict(assign=True), as PyTorch's: the module takes the state dict's tensors themselves instead of
copying into its own, so a model built on the meta device gets its weights without allocating twice:

    with torch.device("meta"):
        model = Net()
    model.load_state_dict(torch.load(path, mmap=True), assign=True)

A parameter stays a Parameter (the tensor is wrapped, sharing its memory) with its requires_grad; a buffer is
the tensor itself. Without assign, loading into a meta parameter copies nothing, and PyTorch's warning says so."""
import warnings

from trainrun.nn._module import remember
from trainrun.nn.parameter import Parameter


def _owner(module, key):
    """(the module that holds state dict entry `key`, the entry's local name)."""
    path, _, name = key.rpartition(".")
    return (module.get_submodule(path) if path else module), name


def assign_entries(module, entries):
    """entries: state dict key -> tensor, each a key of module's own state (checked by the caller)."""
    for key, value in entries.items():
        owner, name = _owner(module, key)
        current = dict(owner._named_local_parameters("", False)).get(name)
        if current is None:
            owner._replace_buffer(name, value)
            remember(value)
            continue
        if value._cdata == current._cdata:  # already this tensor (a sharded parameter's new shard)
            continue
        if isinstance(value, Parameter):
            value.requires_grad_(current.requires_grad)
        else:
            value = Parameter(value, requires_grad=current.requires_grad)
        owner._replace_parameter(name, value)
        remember(value)


def warn_meta_no_ops(own, entries):
    """PyTorch's warning for each entry copied into a meta tensor (nothing is copied)."""
    for key, value in entries.items():
        target = own.get(key)
        if getattr(target, "is_meta", False) and not getattr(value, "is_meta", True):
            warnings.warn(f"for {key}: copying from a non-meta parameter in the checkpoint to a meta parameter in "
                          "the current model, which is a no-op. (Did you mean to pass `assign=True` to assign items "
                          "in the state dictionary to their corresponding key in the module instead of copying them "
                          "in place?)")
