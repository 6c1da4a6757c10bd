"""How a module shows its sharded parameters: tensor parallelism and
fully_shard keep each parameter's local shard in the module's registry (so
optimizers, state_dict and C++ code see ordinary tensors) and record the
DTensor over it here; `module.weight` then returns that DTensor."""
from trainrun import _C
from trainrun.nn._module import TENSORS_REPLACED_HOOKS, replace_tensors

DTENSOR_PARAMS = "_dtensor_params"
VIEWS_OFF = "_dtensor_views_off"  # set while fully_shard has the full parameters in place (in forward)


def set_view(module, name, dtensor):
    table = module.__dict__.get(DTENSOR_PARAMS)
    if table is None:
        table = {}
        object.__setattr__(module, DTENSOR_PARAMS, table)
    dtensor._is_param = True  # a parameter's view: isinstance(module.weight, nn.Parameter), as in PyTorch
    table[name] = dtensor


def _as_parameter(dtensor, requires_grad=True):
    """nn.Parameter(dtensor): a DTensor over a Parameter sharing the local piece's memory."""
    from trainrun.distributed.tensor._dtensor import DTensor
    from trainrun.nn import Parameter
    out = DTensor(Parameter(dtensor._local_tensor, requires_grad), dtensor._spec)
    out._is_param = True
    return out


def _register_as_parameter(dtensor, module, name):
    """module.name = nn.Parameter(dtensor) or register_parameter(name, it): the registry holds the local piece
    (what optimizers and C++ code update), and module.name and named_parameters show the DTensor."""
    from trainrun.distributed.tensor._dtensor import DTensor
    local = dtensor._local_tensor
    if name in dict(module._named_local_parameters(False)):
        module._replace_parameter(name, local)
    else:
        module.register_parameter(name, local, local.requires_grad)
    set_view(module, name, DTensor(module._param(name), dtensor._spec))


GRADIENT_SUMS = "_gradient_summed_over"  # name -> the group a parameter's gradient is summed over


def sum_gradient_over(module, name, group):
    """Records that parameter `name`'s gradient is summed over `group` (a replicated parameter computed on
    sequence shards): whoever replaces the parameter's tensor (fully_shard) must keep doing it."""
    table = module.__dict__.get(GRADIENT_SUMS)
    if table is None:
        table = {}
        object.__setattr__(module, GRADIENT_SUMS, table)
    table[name] = group


def gradient_sum_group(module, name):
    return (module.__dict__.get(GRADIENT_SUMS) or {}).get(name)


def views_off(module, off):
    object.__setattr__(module, VIEWS_OFF, off)


def _views_replaced(modules, replaced):
    """to_empty or load_state_dict(assign=True) gave the modules new local tensors: their DTensor views wrap the
    new ones."""
    from trainrun.distributed.tensor._dtensor import DTensor
    for m in modules:
        table = m.__dict__.get(DTENSOR_PARAMS) or {}
        for name, view in table.items():
            new = replaced.get(view._local_tensor._cdata)
            if new is not None:
                table[name] = DTensor(new, view._spec)


TENSORS_REPLACED_HOOKS.append(_views_replaced)

_original_getattr = _C.nn.Module.__getattr__


def _getattr(self, name):
    table = self.__dict__.get(DTENSOR_PARAMS)
    if table is not None and name in table and not self.__dict__.get(VIEWS_OFF):
        return table[name]
    return _original_getattr(self, name)


_C.nn.Module.__getattr__ = _getattr


def _attach_parameter_hooks():
    from trainrun.distributed.tensor._dtensor import DTensor
    DTensor._as_parameter = staticmethod(_as_parameter)
    DTensor._register_as_parameter = _register_as_parameter


_attach_parameter_hooks()
_named_local_parameters = _C.nn.Module._named_local_parameters


def _named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
    """PyTorch's: a sharded parameter (tensor parallelism, fully_shard) comes as its DTensor."""
    if isinstance(prefix, bool):  # named_parameters(False)
        prefix, recurse = "", prefix
    views = {}
    for m in (self.modules() if recurse else [self]):
        table = m.__dict__.get(DTENSOR_PARAMS)
        if table and not m.__dict__.get(VIEWS_OFF):
            views.update((view._local_tensor._cdata, view) for view in table.values())
    for name, p in _named_local_parameters(self, prefix, recurse, remove_duplicate):
        yield name, (views.get(p._cdata, p) if views else p)


_named_parameters.__doc__ = _named_local_parameters.__doc__
_C.nn.Module.named_parameters = _named_parameters


_original_state_dict = _C.nn.Module.state_dict
_original_load_state_dict = _C.nn.Module.load_state_dict


def _views_by_key(module):
    """state_dict key -> DTensor view, for every sharded parameter under module (tensor parallelism, FSDP).
    Keys are renamed by the module's state dict hooks as the state dict's own are (a checkpoint or FSDP1
    wrapper leaves its name out): every rank finds the same views, empty shards included, so the ranks'
    collectives over them stay in step."""
    from trainrun.nn import _state_dict_hooks
    views = {}
    for prefix, m in module.named_modules():
        for name, view in (m.__dict__.get(DTENSOR_PARAMS) or {}).items():
            views[f"{prefix}.{name}" if prefix else name] = view
    if not views:
        return views
    renamed = _state_dict_hooks.run_state_dict_post_hooks(module, dict(views), "")
    return renamed if isinstance(renamed, dict) else views


def _state_dict(self, *args, **kwargs):
    """PyTorch's: sharded parameters appear as DTensors (over the module's own shards: no communication,
    and loading into them in place updates the module)."""
    out = _original_state_dict(self, *args, **kwargs)
    for key, view in _views_by_key(self).items():
        if key in out:
            out[key] = view
    return out


def _assigned_piece(old, piece):
    """load_state_dict(assign=True): the tensor that becomes a sharded parameter's local piece (the state dict's
    own memory, as PyTorch assigns it), with the old piece's requires_grad and clip_grad_norm_ registration."""
    from trainrun.nn import utils as nn_utils
    new = piece.detach().contiguous()
    new.requires_grad_(old.requires_grad)
    nn_utils._moved(old, new)
    return new


def _load_state_dict(self, state_dict, strict=True, assign=False):
    """Takes DTensors in any layout over the same mesh (redistributed to this module's), or full tensors
    (each rank keeps its piece), for the sharded parameters; plain tensors for the rest. assign: the loaded
    pieces become the parameters' (fully_shard's shards included), as a model built on the meta device needs."""
    from trainrun.distributed.tensor._dtensor import DTensor
    from trainrun.distributed.tensor._redistribute import redistribute_local
    from trainrun.distributed.tensor.placement_types import Replicate
    views = _views_by_key(self)
    local, replaced = {}, {}
    for key, value in state_dict.items():
        view = views.get(key)
        if view is not None and isinstance(value, DTensor):
            value = value.redistribute(view.device_mesh, view.placements).to_local()
        elif view is not None and tuple(value.shape) == tuple(view.shape):
            replicated = tuple(Replicate() for _ in view.placements)
            value = redistribute_local(value.detach(), tuple(view.shape), view.device_mesh, replicated,
                                       view.placements)
        elif isinstance(value, DTensor):
            value = value.full_tensor()
        if assign and view is not None and tuple(value.shape) == tuple(view._local_tensor.shape):
            value = replaced[view._local_tensor._cdata] = _assigned_piece(view._local_tensor, value)
        local[key] = value
    if replaced:
        replace_tensors(list(self.modules()), replaced)
    return _original_load_state_dict(self, local, strict, assign)  # nn's: checks the keys, returns them


_C.nn.Module.state_dict = _state_dict
_C.nn.Module.load_state_dict = _load_state_dict
