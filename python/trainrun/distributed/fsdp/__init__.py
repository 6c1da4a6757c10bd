"""trainrun.distributed.fsdp: FSDP2's fully_shard, FSDPModule,
MixedPrecisionPolicy, OffloadPolicy, CPUOffloadPolicy, UnshardHandle and
register_fsdp_forward_method, with PyTorch 2.x's names. fully_shard's API is
in _fully_shard.py, one group's collectives in _param_group.py, when they
are issued (prefetching) in _schedule.py. FSDP1's FullyShardedDataParallel
(with its ShardingStrategy, MixedPrecision, StateDictType and configs) is a
wrapper over fully_shard: _fully_sharded_data_parallel.py; its auto-wrap
policies are in wrap.py."""
from trainrun.distributed.fsdp._fully_shard import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy,  # noqa
                                                    OffloadPolicy, UnshardHandle, fully_shard,
                                                    register_fsdp_forward_method)
from trainrun.distributed.fsdp._fully_sharded_data_parallel import (  # noqa: F401
    BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig, FullyShardedDataParallel,
    LocalOptimStateDictConfig, LocalStateDictConfig, MixedPrecision, OptimStateDictConfig, OptimStateKeyType,
    ShardedOptimStateDictConfig, ShardedStateDictConfig, ShardingStrategy, StateDictConfig, StateDictSettings,
    StateDictType)
from trainrun.distributed.fsdp import wrap  # noqa: F401,E402
from trainrun.distributed.fsdp import sharded_grad_scaler  # noqa: F401,E402  (ShardedGradScaler)


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
