"""torch.distributed.checkpoint.state_dict's model helpers: a model's state dict
sharded (DTensors, what dcp.save wants) or full (every parameter whole, for
torch.save or another framework), and the way back, for DDP, FSDP and tensor
parallel models alike."""
import dataclasses

from trainrun import distributed as dist
from trainrun.distributed.tensor._dtensor import DTensor


@dataclasses.dataclass
class StateDictOptions:
    full_state_dict: bool = False  # whole tensors instead of DTensors (gathered: communication)
    cpu_offload: bool = False  # with full_state_dict: only rank 0 gets the values (others: {})
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False  # set_*: rank 0 holds the full state dict; it reaches every rank
    flatten_optimizer_state_dict: bool = False


def _unsupported(options, what):
    if options.flatten_optimizer_state_dict or not options.keep_submodule_prefixes:
        raise NotImplementedError(f"{what}: flatten_optimizer_state_dict and keep_submodule_prefixes=False are "
                                  "not supported")


# Module names wrappers put in a key that PyTorch's state_dict API leaves out (its _get_fqns): compile's, the
# activation-checkpoint wrapper's and FSDP1's. DDP's "module." goes too when the model is the DDP wrapper.
_WRAPPER_PARTS = ("_orig_mod", "_checkpoint_wrapped_module", "_fsdp_wrapped_module")


def _fqn(model, key):
    if hasattr(model, "module") and key.startswith("module."):
        key = key[len("module."):]
    return ".".join(part for part in key.split(".") if part not in _WRAPPER_PARTS)


import contextlib  # noqa: E402


@contextlib.contextmanager
def _sharded_fsdp1(model):
    """FSDP1 wrappers give full state dicts by default; this API reads them sharded (and gathers itself when
    asked for full_state_dict), as PyTorch's sets their state dict type."""
    from trainrun.distributed.fsdp import FullyShardedDataParallel, StateDictType
    if not any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        yield
        return
    with FullyShardedDataParallel.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        yield


def get_model_state_dict(model, *, submodules=None, options=None):
    """The model's state dict: DTensors for sharded parameters, or (full_state_dict) every tensor whole."""
    options = options or StateDictOptions()
    _unsupported(options, "get_model_state_dict")
    if submodules is not None:
        raise NotImplementedError("get_model_state_dict: submodules is not supported")
    with _sharded_fsdp1(model):
        state = {_fqn(model, k): v for k, v in model.state_dict().items()}
    if options.ignore_frozen_params:
        frozen = {_fqn(model, name) for name, p in model.named_parameters() if not p.requires_grad}
        state = {k: v for k, v in state.items() if k not in frozen}
    if options.full_state_dict:
        state = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in state.items()}
        if options.cpu_offload:
            state = {k: v.to("cpu") for k, v in state.items()}
            if dist.is_initialized() and dist.get_rank() != 0:
                return {}
    return state


def _local_of(value):
    return value.to_local() if isinstance(value, DTensor) else value


def _broadcast_from_rank0(own, model_state_dict, device):
    """Every rank's copy of rank 0's full state dict: tensors shaped as the model's whole ones (allocated on
    `device`, filled by rank 0 and broadcast), other values (extra state) as rank 0's objects."""
    from trainrun import empty
    from trainrun._autograd import no_grad
    rank0 = dist.get_rank() == 0
    full = {}
    with no_grad():
        for key, value in own.items():
            if not hasattr(value, "shape"):
                continue
            target = empty(tuple(value.shape), dtype=value.dtype, device=device)
            if rank0 and key in model_state_dict:
                target.copy_(model_state_dict[key])
            dist.broadcast(target, 0)
            full[key] = target
    others = [{k: v for k, v in model_state_dict.items() if k in own and not hasattr(own[k], "shape")}
              if rank0 else None]
    dist.broadcast_object_list(others, 0)
    full.update(others[0])
    return full


def set_model_state_dict(model, model_state_dict, *, options=None):
    """Loads a sharded or full state dict into the model, whatever its sharding. broadcast_from_rank0: only
    rank 0 passes the (full) values; the others pass {} and receive them. A model on the meta device (built
    under `with torch.device("meta")`, sharded, not materialised) takes the loaded tensors as its own (load_state_dict
    with assign=True), on the process group's device, as PyTorch's does."""
    options = options or StateDictOptions()
    _unsupported(options, "set_model_state_dict")
    own = get_model_state_dict(model)  # this rank's pieces (DTensors for sharded ones): no communication
    on_meta = any(getattr(_local_of(v), "is_meta", False) for v in own.values())
    if options.broadcast_from_rank0 and dist.is_initialized():
        if options.strict and dist.get_rank() == 0:
            missing = sorted(set(own) - set(model_state_dict))
            if missing:
                raise KeyError(f"set_model_state_dict: rank 0's state dict has no {missing[:5]}")
        meta_device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        devices = {_local_of(v).device for v in own.values() if hasattr(v, "shape") and not _local_of(v).is_meta}
        model_state_dict = _broadcast_from_rank0(own, model_state_dict,
                                                 next(iter(devices)) if len(devices) == 1 else meta_device)
    with _sharded_fsdp1(model):
        actual = {_fqn(model, k): k for k in model.state_dict()}  # (the model's own keys, wrappers' names in them)
    model_state_dict = {actual.get(k, k): v for k, v in model_state_dict.items()}
    return model.load_state_dict(model_state_dict, strict=options.strict, assign=on_meta)


# ---- optimizers ------------------------------------------------------------------------------------------
def _param_names(model):
    """Parameter (by tensor identity) -> its name in get_model_state_dict, and name -> that entry (a DTensor
    for a sharded parameter, which tells the optimizer state's layout)."""
    names = {}
    for name, p in model._named_local_parameters():
        names[p._cdata] = _fqn(model, name)
    return names, get_model_state_dict(model)


def _optimizers(optimizers):
    return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]


def _init_state(optimizer):
    """A fresh optimizer has no state to load into: take one step at learning rate 0 on zero gradients,
    as PyTorch does, so every state tensor exists with its final shape (lr 0 leaves the parameters as they
    are, weight decay included)."""
    from trainrun._autograd import no_grad
    if optimizer.state:
        return
    saved_grads, saved_lrs = [], []
    with no_grad():
        for group in optimizer.param_groups:
            saved_lrs.append(group["lr"])
            group["lr"] = 0.0
            for p in group["params"]:
                saved_grads.append(p.grad)
                if p.grad is None:
                    p.grad = p.detach().new_zeros(tuple(p.shape))
    optimizer.step()
    grads = iter(saved_grads)
    for group, lr in zip(optimizer.param_groups, saved_lrs):
        group["lr"] = lr
        for p in group["params"]:
            p.grad = next(grads)


_init_optim_state = _init_state  # PyTorch's name, which its FSDP2 example imports


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None):
    """The optimizers' state keyed by parameter name (PyTorch's layout: {"state": {name: {...}},
    "param_groups": [{..., "params": [names]}]}). State tensors of a sharded parameter are DTensors laid
    out as the parameter, so dcp.save writes each rank's piece and dcp.load reshards them for any number
    of ranks; full_state_dict gathers them whole. A fresh optimizer's state is created first."""
    options = options or StateDictOptions()
    _unsupported(options, "get_optimizer_state_dict")
    if submodules is not None:
        raise NotImplementedError("get_optimizer_state_dict: submodules is not supported")
    names, model_state = _param_names(model)
    out = {"state": {}, "param_groups": []}
    for optimizer in _optimizers(optimizers):
        _init_state(optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        raw = optimizer.state_dict()
        for index, state in raw["state"].items():
            name = names.get(params[index]._cdata)
            if name is None:
                raise KeyError(f"get_optimizer_state_dict: the optimizer has a parameter that {type(model).__name__} "
                               "does not (pass the model the optimizer was built over)")
            layout = model_state.get(name)
            out["state"][name] = {key: _like(value, layout, options) for key, value in state.items()}
        for group in raw["param_groups"]:
            out["param_groups"].append(dict(group, params=[names[params[i]._cdata] for i in group["params"]]))
    _union_of_group_names(out["param_groups"])
    if options.full_state_dict and options.cpu_offload and dist.is_initialized() and dist.get_rank() != 0:
        return {}
    return out


def _union_of_group_names(param_groups):
    """Each group's "params" become the names the group has on any rank (a collective when distributed): a
    pipeline stage's optimizer holds only its own layers, and the checkpoint must name them all, the same
    on every rank. (set_optimizer_state_dict takes membership from the optimizer it loads into.)"""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, [group["params"] for group in param_groups])
    for i, group in enumerate(param_groups):  # (dict keys: the first rank's order, each name once)
        group["params"] = list(dict.fromkeys(n for groups in everyone if i < len(groups) for n in groups[i]))


def _like(value, layout, options):
    """An optimizer state tensor shaped as its parameter's shard becomes a DTensor laid out as the
    parameter (full: gathered whole); steps and other values stay as they are. (The optimizers give a DTensor
    parameter's state as DTensors already.)"""
    if isinstance(value, DTensor):
        return value.full_tensor() if options.full_state_dict else value
    if not isinstance(layout, DTensor) or not hasattr(value, "shape") or \
            tuple(value.shape) != tuple(layout.to_local().shape) or value.ndim == 0:
        return value
    sharded = DTensor.from_local(value, layout.device_mesh, layout.placements, shape=tuple(layout.shape))
    return sharded.full_tensor() if options.full_state_dict else sharded


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None):
    """Loads what get_optimizer_state_dict gave (possibly saved from another number of ranks and loaded
    with dcp.load into get_optimizer_state_dict's own structure) into the optimizers."""
    options = options or StateDictOptions()
    _unsupported(options, "set_optimizer_state_dict")
    names, model_state = _param_names(model)
    groups = iter(optim_state_dict["param_groups"])
    for optimizer in _optimizers(optimizers):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        index_of = {names[p._cdata]: i for i, p in enumerate(params)}
        state = {}
        for name, entries in optim_state_dict["state"].items():
            if name not in index_of:
                continue  # another optimizer's parameter
            layout = model_state.get(name)
            state[index_of[name]] = {key: _local(value, layout) for key, value in entries.items()}
        param_groups = []
        for group in optimizer.param_groups:  # the saved hyperparameters, this optimizer's own members
            saved = next(groups)
            param_groups.append(dict(saved, params=[index_of[names[p._cdata]] for p in group["params"]]))
        optimizer.load_state_dict({"state": state, "param_groups": param_groups})


def _local(value, layout):
    """This rank's piece of a state tensor, in its parameter's layout."""
    if isinstance(value, DTensor):
        if isinstance(layout, DTensor):
            value = value.redistribute(layout.device_mesh, layout.placements)
            return value.to_local()
        return value.full_tensor()
    if isinstance(layout, DTensor) and hasattr(value, "shape") and tuple(value.shape) == tuple(layout.shape) \
            and value.ndim > 0:  # a full tensor: keep this rank's piece
        from trainrun.distributed.tensor._redistribute import redistribute_local
        from trainrun.distributed.tensor.placement_types import Replicate
        replicated = tuple(Replicate() for _ in layout.placements)
        return redistribute_local(value.detach(), tuple(layout.shape), layout.device_mesh, replicated,
                                  layout.placements)
    return value


def get_state_dict(model, optimizers, *, submodules=None, options=None):
    """(get_model_state_dict, get_optimizer_state_dict) in one call, as PyTorch's."""
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
