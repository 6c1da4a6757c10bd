"""torch.func.functional_call(module, parameters_and_buffers, args, kwargs): the module called with some of its
parameters and buffers replaced by the given tensors (by state_dict name), then put back, so gradients flow to the
given tensors (per-sample gradients, ensembles, meta-learning)."""


def _owner(module, name):
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    dicts = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, (tuple, list)) else \
        [parameter_and_buffer_dicts]
    replacements = {}
    for d in dicts:
        for k, v in d.items():
            if k in replacements:
                raise ValueError(f"functional_call got multiple values for key {k}")
            replacements[k] = v
    if strict:
        own = set(dict(module._named_local_parameters())) | set(dict(module.named_buffers()))
        missing, unexpected = sorted(own - set(replacements)), sorted(set(replacements) - own)
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
    saved = []
    try:
        for name, tensor in replacements.items():
            owner, leaf = _owner(module, name)
            params, buffers = dict(owner._named_local_parameters(False)), dict(owner.named_buffers(False))
            if leaf in params:
                saved.append((owner, leaf, params[leaf], "parameter"))
                owner._replace_parameter(leaf, tensor)
            elif leaf in buffers:
                saved.append((owner, leaf, buffers[leaf], "buffer"))
                owner._replace_buffer(leaf, tensor)
            else:
                raise AttributeError(f"functional_call: {type(module).__name__} has no parameter or buffer {name!r}")
        args = () if args is None else (args if isinstance(args, tuple) else (args,))
        return module(*args, **(kwargs or {}))
    finally:
        for owner, leaf, original, kind in reversed(saved):
            if kind == "parameter":
                owner._replace_parameter(leaf, original)
            else:
                owner._replace_buffer(leaf, original)




def stack_module_state(models):
    """(params, buffers): each name's tensors of the (same-structured) models stacked along a new dim 0, for
    vmap over functional_call (model ensembling). Stacked parameters are new leaves that require grad where
    the models' did."""
    import trainrun
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    first = dict(models[0]._named_local_parameters())
    if not all(type(m) is type(models[0]) and dict(m._named_local_parameters()).keys() == first.keys()
               for m in models):
        raise RuntimeError("stack_module_state: Expected all models to have the same structure and names.")
    params = {name: trainrun.stack([dict(m._named_local_parameters())[name].detach() for m in models])
              .requires_grad_(p.requires_grad) for name, p in first.items()}
    buffers = {name: trainrun.stack([dict(m.named_buffers())[name] for m in models])
               for name, _ in models[0].named_buffers()}
    return params, buffers
