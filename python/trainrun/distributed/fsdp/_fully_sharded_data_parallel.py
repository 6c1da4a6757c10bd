"""FullyShardedDataParallel: PyTorch's FSDP1 API (a wrapper module, auto_wrap_policy, ShardingStrategy,
MixedPrecision, state_dict_type, optim_state_dict, no_sync, summon_full_params, clip_grad_norm_) over fully_shard.

    model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), mixed_precision=MixedPrecision(...))

Each wrapper holds its module as _fsdp_wrapped_module and fully_shards it (a ShardingStrategy picks the mesh
and whether parameters are resharded after forward); the policy wraps the chosen submodules first, each its own
group, as FSDP1's recursive wrapping does. Parameters keep their names and objects (use_orig_params=True's
behaviour, whatever is passed): optimizers, clip_grad_norm_ and state dicts see the original parameters,
sharded as DTensors. state_dict() gives full tensors (FULL_STATE_DICT, the default), DTensors
(SHARDED_STATE_DICT) or local shards (LOCAL_STATE_DICT), under the unwrapped model's keys."""
import contextlib
import dataclasses
import enum
import os
import weakref
from typing import NamedTuple, Optional

from trainrun import _C, nn
from trainrun import distributed as dist
from trainrun.distributed.fsdp._fully_shard import FSDPModule, MixedPrecisionPolicy, fully_shard
from trainrun.distributed.fsdp.wrap import apply_policy
from trainrun.distributed.tensor._dtensor import DTensor
from trainrun.distributed.tensor.placement_types import chunk_offsets
from trainrun.nn._module_wrapper import ModuleWrapper

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "BackwardPrefetch", "StateDictType", "MixedPrecision",
           "CPUOffload", "StateDictConfig", "FullStateDictConfig", "LocalStateDictConfig", "ShardedStateDictConfig",
           "OptimStateDictConfig", "FullOptimStateDictConfig", "LocalOptimStateDictConfig",
           "ShardedOptimStateDictConfig", "StateDictSettings"]

_WRAPPED = "_fsdp_wrapped_module"


class ShardingStrategy(enum.Enum):
    FULL_SHARD = enum.auto()
    SHARD_GRAD_OP = enum.auto()
    NO_SHARD = enum.auto()
    HYBRID_SHARD = enum.auto()
    _HYBRID_SHARD_ZERO2 = enum.auto()


class BackwardPrefetch(enum.Enum):
    BACKWARD_PRE = enum.auto()
    BACKWARD_POST = enum.auto()


class OptimStateKeyType(enum.Enum):
    """How an optimizer state dict names its parameters: by position (PARAM_ID, an ordinary optimizer's) or by
    name (PARAM_NAME, FSDP's full optimizer state dict)."""
    PARAM_NAME = enum.auto()
    PARAM_ID = enum.auto()


class StateDictType(enum.Enum):
    FULL_STATE_DICT = enum.auto()
    LOCAL_STATE_DICT = enum.auto()
    SHARDED_STATE_DICT = enum.auto()


@dataclasses.dataclass
class MixedPrecision:
    param_dtype: Optional[object] = None
    reduce_dtype: Optional[object] = None
    buffer_dtype: Optional[object] = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True
    _module_classes_to_ignore: tuple = ()


@dataclasses.dataclass
class CPUOffload:
    offload_params: bool = False


@dataclasses.dataclass
class StateDictConfig:
    offload_to_cpu: bool = False


@dataclasses.dataclass
class FullStateDictConfig(StateDictConfig):
    rank0_only: bool = False


@dataclasses.dataclass
class LocalStateDictConfig(StateDictConfig):
    pass


@dataclasses.dataclass
class ShardedStateDictConfig(StateDictConfig):
    _use_dtensor: bool = False


@dataclasses.dataclass
class OptimStateDictConfig:
    offload_to_cpu: bool = True


@dataclasses.dataclass
class FullOptimStateDictConfig(OptimStateDictConfig):
    rank0_only: bool = False


@dataclasses.dataclass
class LocalOptimStateDictConfig(OptimStateDictConfig):
    offload_to_cpu: bool = False


@dataclasses.dataclass
class ShardedOptimStateDictConfig(OptimStateDictConfig):
    _use_dtensor: bool = False


class StateDictSettings(NamedTuple):
    state_dict_type: StateDictType
    state_dict_config: StateDictConfig
    optim_state_dict_config: OptimStateDictConfig


_DEFAULT_CONFIGS = {StateDictType.FULL_STATE_DICT: (FullStateDictConfig, FullOptimStateDictConfig),
                    StateDictType.LOCAL_STATE_DICT: (LocalStateDictConfig, LocalOptimStateDictConfig),
                    StateDictType.SHARDED_STATE_DICT: (ShardedStateDictConfig, ShardedOptimStateDictConfig)}


def _mesh(strategy, process_group, device_mesh, device_type):
    """The mesh fully_shard gets: 1-D over the group (FULL_SHARD, SHARD_GRAD_OP); 2-D (replicas, shards) for
    HYBRID_SHARD (shards within a node of LOCAL_WORLD_SIZE ranks) and NO_SHARD (every rank a replica)."""
    from trainrun.distributed.device_mesh import DeviceMesh, init_device_mesh
    hybrid = strategy in (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)
    if device_mesh is not None:
        if hybrid != (device_mesh.ndim == 2) and strategy != ShardingStrategy.NO_SHARD:
            raise ValueError(f"FullyShardedDataParallel: {strategy.name} needs a {2 if hybrid else 1}-D device_mesh, "
                             f"got {device_mesh.ndim}-D")
        return device_mesh
    if isinstance(process_group, tuple):
        raise NotImplementedError("FullyShardedDataParallel: a (intra-node, inter-node) process_group pair is not "
                                  "supported; pass device_mesh")
    world = dist.get_world_size(process_group)
    if strategy == ShardingStrategy.NO_SHARD:
        return init_device_mesh(device_type, (world, 1))
    if hybrid:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        if world % local:
            raise ValueError(f"FullyShardedDataParallel: HYBRID_SHARD needs the world size ({world}) to be a multiple "
                             f"of LOCAL_WORLD_SIZE ({local})")
        return init_device_mesh(device_type, (world // local, local))
    if process_group is not None:
        return DeviceMesh.from_group(process_group, device_type)
    return init_device_mesh(device_type, (world,))


_WRAPPERS = weakref.WeakSet()  # every wrapper made in this process (check_is_root looks for one holding another)


class FullyShardedDataParallel(ModuleWrapper):
    _child_name = _WRAPPED

    def __init__(self, module, process_group=None, sharding_strategy=None, cpu_offload=None, auto_wrap_policy=None,
                 backward_prefetch=BackwardPrefetch.BACKWARD_PRE, mixed_precision=None, ignored_modules=None,
                 param_init_fn=None, device_id=None, sync_module_states=False, forward_prefetch=False,
                 limit_all_gathers=True, use_orig_params=False, ignored_states=None, device_mesh=None):
        super().__init__()
        _WRAPPERS.add(self)
        if not dist.is_initialized():
            raise RuntimeError("FullyShardedDataParallel: the default process group is not initialized (call "
                               "init_process_group first)")
        strategy = sharding_strategy or ShardingStrategy.FULL_SHARD
        device_type = "cuda" if device_id is not None and str(device_id) != "cpu" else "cpu"
        inner = dict(process_group=process_group, sharding_strategy=strategy, cpu_offload=cpu_offload,
                     backward_prefetch=backward_prefetch, mixed_precision=mixed_precision,
                     ignored_modules=ignored_modules, param_init_fn=param_init_fn, device_id=device_id,
                     sync_module_states=sync_module_states, forward_prefetch=forward_prefetch,
                     limit_all_gathers=limit_all_gathers, use_orig_params=use_orig_params,
                     ignored_states=ignored_states, device_mesh=device_mesh)
        ignored = list(ignored_modules or ()) + [s for s in (ignored_states or ()) if isinstance(s, _C.nn.Module)]
        ignored_ids = {id(m) for root in ignored for m in root.modules()}
        if auto_wrap_policy is not None:
            apply_policy(module, auto_wrap_policy, lambda child: FullyShardedDataParallel(child, **inner),
                         lambda child: isinstance(child, FullyShardedDataParallel) or id(child) in ignored_ids)
        if any(p.is_meta for p in module.parameters()):
            if param_init_fn is not None:
                param_init_fn(module)
            else:
                module.to_empty(device=device_type)
                for m in module.modules():
                    if callable(getattr(m, "reset_parameters", None)):
                        m.reset_parameters()
        if sync_module_states:  # every rank starts from rank 0's values
            with _no_grad():
                for tensor in list(module.parameters()) + list(module.buffers()):
                    if not isinstance(tensor, DTensor):
                        dist.broadcast(tensor.detach(), 0, group=process_group)
        self._wrap(module)
        policy = mixed_precision or MixedPrecision()
        mp = MixedPrecisionPolicy(param_dtype=policy.param_dtype, reduce_dtype=policy.reduce_dtype,
                                  cast_forward_inputs=policy.cast_forward_inputs or policy.cast_root_forward_inputs)
        ignored_params = [p for m in ignored for p in m.parameters()] + \
            [s for s in (ignored_states or ()) if _C._is_cpp_tensor(s)]
        mesh = _mesh(strategy, process_group, device_mesh, device_type)
        reshard = strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.HYBRID_SHARD)
        name = module._get_name()
        fully_shard(module, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp,
                    ignored_params=ignored_params or None)
        type(module)._get_name = lambda self: name  # (prints as itself, as in PyTorch's FSDP, not as FSDPNet)
        self.sharding_strategy, self.mixed_precision, self.cpu_offload = strategy, mixed_precision, cpu_offload
        self._state_dict_settings = StateDictSettings(StateDictType.FULL_STATE_DICT, FullStateDictConfig(),
                                                      FullOptimStateDictConfig())

    # ---- the wrapped module -------------------------------------------------------------------------
    @property
    def module(self):
        return self._fsdp_wrapped_module

    def forward(self, *args, **kwargs):
        return self._fsdp_wrapped_module(*args, **kwargs)

    def _sharded(self):
        return [m for m in self.modules() if isinstance(m, FSDPModule)]

    # ---- state dicts --------------------------------------------------------------------------------
    def state_dict(self, *args, **kwargs):
        state = super().state_dict(*args, **kwargs)
        kind, config, _ = self._state_dict_settings
        if kind == StateDictType.SHARDED_STATE_DICT:
            converted = state
        elif kind == StateDictType.LOCAL_STATE_DICT:
            converted = {k: (v.to_local() if isinstance(v, DTensor) else v) for k, v in state.items()}
        else:
            converted = {k: (v.full_tensor() if isinstance(v, DTensor) else v) for k, v in state.items()}
            if getattr(config, "rank0_only", False) and dist.get_rank() != 0:
                return {}
        if config.offload_to_cpu:
            converted = {k: v.cpu() if _C._is_cpp_tensor(v) else v for k, v in converted.items()}
        if converted is not state:
            state.clear()
            state.update(converted)
        return state

    @staticmethod
    def set_state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        """Sets, on every FSDP wrapper under module, what state_dict() and optim_state_dict() give; returns the
        previous StateDictSettings."""
        wrappers = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if not wrappers:
            raise ValueError("set_state_dict_type: the module holds no FullyShardedDataParallel")
        previous = wrappers[0]._state_dict_settings
        config_type, optim_type = _DEFAULT_CONFIGS[state_dict_type]
        settings = StateDictSettings(state_dict_type, state_dict_config or config_type(),
                                     optim_state_dict_config or optim_type())
        for wrapper in wrappers:
            wrapper._state_dict_settings = settings
        return previous

    @staticmethod
    def fsdp_modules(module, root_only=False):
        """The FullyShardedDataParallel wrappers under module (itself included), or only the outermost ones."""
        wrappers = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if root_only:
            inner = {id(w) for outer in wrappers for w in outer.modules() if w is not outer}
            wrappers = [w for w in wrappers if id(w) not in inner]
        return wrappers

    def check_is_root(self):
        """Whether this wrapper is outermost: no FullyShardedDataParallel holds it (checked over the wrappers
        this process made)."""
        return not any(self is not w and any(m is self for m in w.modules()) for w in _WRAPPERS)

    @staticmethod
    def get_state_dict_type(module):
        wrappers = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if not wrappers:
            raise ValueError("get_state_dict_type: the module holds no FullyShardedDataParallel")
        return wrappers[0]._state_dict_settings

    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        previous = FullyShardedDataParallel.set_state_dict_type(module, state_dict_type, state_dict_config,
                                                                optim_state_dict_config)
        try:
            yield
        finally:
            FullyShardedDataParallel.set_state_dict_type(module, *previous)

    @staticmethod
    def optim_state_dict(model, optim, optim_state_dict=None, group=None):
        """The optimizer's state keyed by parameter name, full or sharded as the state dict type says."""
        from trainrun.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict
        kind, _, config = FullyShardedDataParallel.get_state_dict_type(model)
        full = kind == StateDictType.FULL_STATE_DICT
        # (offloading here, not in get_optimizer_state_dict, whose cpu_offload also keeps it to rank 0)
        state = get_optimizer_state_dict(model, optim, options=StateDictOptions(full_state_dict=full))
        if full and getattr(config, "rank0_only", False) and dist.get_rank() != 0:
            return {}
        if config.offload_to_cpu:
            state["state"] = {name: {k: v.cpu() if _C._is_cpp_tensor(v) else v for k, v in entries.items()}
                              for name, entries in state["state"].items()}
        return state

    @staticmethod
    def optim_state_dict_to_load(model, optim, optim_state_dict, is_named_optimizer=False, load_directly=False,
                                 group=None):
        """What optim.load_state_dict takes, from optim_state_dict(): this rank's pieces, by index."""
        from trainrun.distributed.checkpoint.state_dict import set_optimizer_state_dict
        set_optimizer_state_dict(model, optim, optim_state_dict)
        return None if load_directly else optim.state_dict()

    @staticmethod
    def rekey_optim_state_dict(optim_state_dict, optim_state_key_type, model, optim_input=None, optim=None):
        """The state dict with its parameters renamed: to their names (PARAM_NAME) or to their positions
        (PARAM_ID), positions counting model.named_parameters() in order (an optimizer built over
        model.parameters()), or over optim's parameter groups when optim is given."""
        from trainrun.distributed.checkpoint.state_dict import _fqn
        names = [_fqn(model, name) for name, _ in model.named_parameters()]
        if optim is not None:
            def identity(p):  # (a C++ optimizer's groups hand out new Python objects for the same tensors)
                return getattr(p, "_cdata", id(p))
            by_id = {identity(p): _fqn(model, name) for name, p in model.named_parameters()}
            names = [by_id[identity(p)] for group in optim.param_groups for p in group["params"]]
        if optim_state_key_type == OptimStateKeyType.PARAM_NAME:
            rename = {i: n for i, n in enumerate(names)}
        elif optim_state_key_type == OptimStateKeyType.PARAM_ID:
            rename = {n: i for i, n in enumerate(names)}
        else:
            raise ValueError(f"rekey_optim_state_dict: optim_state_key_type must be an OptimStateKeyType, got "
                             f"{optim_state_key_type!r}")

        def key(k):
            return rename.get(k, k)
        return {"state": {key(k): v for k, v in optim_state_dict["state"].items()},
                "param_groups": [{**g, "params": [key(k) for k in g["params"]]}
                                 for g in optim_state_dict["param_groups"]]}

    @staticmethod
    def full_optim_state_dict(model, optim, optim_input=None, rank0_only=True, group=None):
        from trainrun.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict
        state = get_optimizer_state_dict(model, optim, options=StateDictOptions(full_state_dict=True))
        return {} if rank0_only and dist.get_rank() != 0 else state

    # ---- training -----------------------------------------------------------------------------------
    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """The gradients' total norm over all ranks' shards (a plain tensor, as FSDP1's), clipped to max_norm."""
        total = nn.utils.clip_grad_norm_(list(self.parameters()), max_norm, norm_type)
        return total.full_tensor() if isinstance(total, DTensor) else total

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally; the first backward outside reduces them."""
        modules = self._sharded()
        for m in modules:
            m.set_requires_gradient_sync(False, recurse=False)
        try:
            yield
        finally:
            for m in modules:
                m.set_requires_gradient_sync(True, recurse=False)

    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module, recurse=True, writeback=True, rank0_only=False, offload_to_cpu=False,
                           with_grads=False):
        """The full parameters in the modules inside; with writeback, changes to them reach the shards."""
        if with_grads:
            raise NotImplementedError("summon_full_params(with_grads=True) is not supported")
        sharded = [m for m in module.modules() if isinstance(m, FSDPModule)]
        if not recurse:
            sharded = sharded[:1]
        for m in sharded:
            m.unshard()
        try:
            yield
        finally:
            for m in sharded:
                if writeback:
                    _write_back(m._fsdp())
                m.reshard()


def _no_grad():
    from trainrun._autograd import no_grad
    return no_grad()


def _write_back(group):
    """Each parameter's shard takes this rank's rows of the full parameter now in its modules."""
    if not group.installed:
        return
    n, rank = group.mesh.size(group.mesh.ndim - 1), group.mesh.get_local_rank(group.mesh.ndim - 1)
    with _no_grad():
        for p in group.params:
            owner, name = p.slots[0]
            moved = owner._param(name).detach().movedim(p.dim, 0)
            start = chunk_offsets(moved.shape[0], n)[rank]
            piece = moved.narrow(0, start, p.rows[rank]).movedim(0, p.dim)
            p.shard.copy_(piece)
