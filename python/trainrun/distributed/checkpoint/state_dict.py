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


def get_model_state_dict(model, *, submodules=None, options=None):
    """The model's state dict: DTensors for sharded parameters, or (full_state_dict) every tensor whole."""
    options = options or StateDictOptions()
    _unsupported(options, "get_model_state_dict")
    if submodules is not None:
        raise NotImplementedError("get_model_state_dict: submodules is not supported")
    state = model.state_dict()
    if hasattr(model, "module") and all(k.startswith("module.") for k in state):  # DDP's wrapper prefix
        state = {k[len("module."):]: v for k, v in state.items()}
    if options.ignore_frozen_params:
        frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
        state = {k: v for k, v in state.items() if k not in frozen and k.replace("module.", "", 1) not in frozen}
    if options.full_state_dict:
        state = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in state.items()}
        if options.cpu_offload:
            state = {k: v.to("cpu") for k, v in state.items()}
            if dist.is_initialized() and dist.get_rank() != 0:
                return {}
    return state


def set_model_state_dict(model, model_state_dict, *, options=None):
    """Loads a sharded or full state dict into the model, whatever its sharding. broadcast_from_rank0: only
    rank 0 passes the (full) values; the others pass {} and receive them."""
    options = options or StateDictOptions()
    _unsupported(options, "set_model_state_dict")
    if options.broadcast_from_rank0 and dist.is_initialized():
        from trainrun._autograd import no_grad
        full = {k: v.detach().clone() for k, v in
                get_model_state_dict(model, options=StateDictOptions(full_state_dict=True)).items()}
        with no_grad():
            for key, target in full.items():
                if dist.get_rank() == 0 and key in model_state_dict:
                    target.copy_(model_state_dict[key])
                dist.broadcast(target, 0)
        if options.strict and dist.get_rank() == 0:
            missing = sorted(set(full) - set(model_state_dict))
            if missing:
                raise KeyError(f"set_model_state_dict: rank 0's state dict has no {missing[:5]}")
        model_state_dict = full
    if hasattr(model, "module") and not any(k.startswith("module.") for k in model_state_dict):
        model_state_dict = {"module." + k: v for k, v in model_state_dict.items()}  # DDP's wrapper prefix
    return model.load_state_dict(model_state_dict, strict=options.strict)
