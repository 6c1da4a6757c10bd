"""torch.distributed.fsdp.wrap: the auto-wrap policies FullyShardedDataParallel takes. A policy is called as
policy(module=, recurse=, nonwrapped_numel=): with recurse=True it says whether to look inside the module, with
recurse=False whether to wrap it (after its children were considered)."""
import contextlib
import functools

__all__ = ["always_wrap_policy", "lambda_auto_wrap_policy", "transformer_auto_wrap_policy",
           "size_based_auto_wrap_policy", "enable_wrap", "wrap", "CustomPolicy", "ModuleWrapPolicy"]


def always_wrap_policy(module, recurse, nonwrapped_numel):
    return True


def lambda_auto_wrap_policy(module, recurse, nonwrapped_numel, lambda_fn):
    """Wraps the modules lambda_fn(module) picks."""
    return True if recurse else bool(lambda_fn(module))


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls):
    """Wraps the instances of transformer_layer_cls (a set of classes): a transformer's blocks."""
    return True if recurse else isinstance(module, tuple(transformer_layer_cls))


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=int(1e8), force_leaf_modules=None,
                                exclude_wrap_modules=None):
    """Wraps a module once the parameters not yet wrapped under it number min_num_params or more. By default,
    as PyTorch's, a container (ModuleList, ModuleDict) is never wrapped itself and MultiheadAttention is a leaf
    (its parameters are wrapped together)."""
    from trainrun import nn
    if force_leaf_modules is None:
        force_leaf_modules = getattr(size_based_auto_wrap_policy, "FORCE_LEAF_MODULES", {nn.MultiheadAttention})
    if exclude_wrap_modules is None:
        exclude_wrap_modules = getattr(size_based_auto_wrap_policy, "EXCLUDE_WRAP_MODULES",
                                       {nn.ModuleList, nn.ModuleDict})
    is_large = nonwrapped_numel >= min_num_params
    if recurse:
        return is_large and not isinstance(module, tuple(force_leaf_modules))
    return is_large and not isinstance(module, tuple(exclude_wrap_modules))


def _or_policy(module, recurse, nonwrapped_numel, policies):
    """Wraps where any of `policies` would."""
    return any(policy(module=module, recurse=recurse, nonwrapped_numel=nonwrapped_numel) for policy in policies)


def _wrap_module_cls_individually(module, module_classes, recurse, *args, **kwargs):
    """Wraps each instance of module_classes."""
    return True if recurse else isinstance(module, tuple(module_classes))


class _ConfigAutoWrap:
    """What enable_wrap set: the wrapper class and its keyword arguments (None outside the context)."""
    wrapper_cls = None
    kwargs = {}


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls, **wrapper_kwargs):
    """Inside, wrap(module) wraps with wrapper_cls(module, **wrapper_kwargs), as PyTorch's; outside, wrap returns
    the module as it is, so a model builds with and without sharding unchanged:

        with enable_wrap(wrapper_cls=FSDP, **fsdp_config):
            self.l1 = wrap(nn.Linear(5, 5))
    """
    if _ConfigAutoWrap.wrapper_cls is not None:
        raise NotImplementedError("enable_wrap: already within an enable_wrap context; they do not nest")
    _ConfigAutoWrap.wrapper_cls, _ConfigAutoWrap.kwargs = wrapper_cls, wrapper_kwargs
    try:
        yield
    finally:
        _ConfigAutoWrap.wrapper_cls, _ConfigAutoWrap.kwargs = None, {}


def wrap(module, **wrap_overrides):
    """module wrapped by enable_wrap's wrapper_cls (wrap_overrides over its keyword arguments), or module itself
    outside enable_wrap."""
    if _ConfigAutoWrap.wrapper_cls is None:
        return module
    kwargs = {**_ConfigAutoWrap.kwargs, **wrap_overrides, **getattr(module, "_wrap_overrides", {})}
    return _ConfigAutoWrap.wrapper_cls(module, **kwargs)


class ModuleWrapPolicy:
    """Wraps the instances of the given module classes (PyTorch 2.x's form of transformer_auto_wrap_policy)."""

    def __init__(self, module_classes):
        self._module_classes = tuple(module_classes)

    def __call__(self, module, recurse, *args, **kwargs):
        return True if recurse else isinstance(module, self._module_classes)


class CustomPolicy:
    """Wraps the modules lambda_fn(module) returns True (or a dict of keyword arguments for that wrap) for."""

    def __init__(self, lambda_fn):
        self._lambda_fn = lambda_fn

    def __call__(self, module, recurse, *args, **kwargs):
        return True if recurse else bool(self._lambda_fn(module))


def _numel(module):
    return sum(p.numel() for p in module.parameters())


def apply_policy(module, policy, wrap, is_wrapped):
    """FSDP1's recursive wrapping of module's descendants (not module itself): children first, each one
    replaced by wrap(child) where policy says, counting only parameters no inner wrap took. Returns the number
    of parameters left unwrapped under module."""
    if isinstance(policy, functools.partial) or callable(policy):
        decide = policy
    else:
        raise TypeError(f"auto_wrap_policy must be callable, got {type(policy).__name__}")
    left = 0
    for name, child in list(module.named_children()):
        if is_wrapped(child):
            continue
        if decide(module=child, recurse=True, nonwrapped_numel=_numel(child)):
            child_left = apply_policy(child, decide, wrap, is_wrapped)
        else:
            child_left = _numel(child)
        if decide(module=child, recurse=False, nonwrapped_numel=child_left):
            setattr(module, name, wrap(child))
        else:
            left += child_left
    return left + sum(p.numel() for p in module.parameters(recurse=False))
