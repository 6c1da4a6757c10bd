"""torch.distributed.fsdp.api: FSDP1's enums and configuration classes."""
from trainrun.distributed.fsdp._fully_sharded_data_parallel import (  # noqa: F401
    BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig, LocalOptimStateDictConfig,
    LocalStateDictConfig, MixedPrecision, OptimStateDictConfig, ShardedOptimStateDictConfig, ShardedStateDictConfig,
    ShardingStrategy, StateDictConfig, StateDictSettings, StateDictType)
