"""torch.distributed.fsdp.fully_sharded_data_parallel: FullyShardedDataParallel and its enums, at PyTorch's path."""
from trainrun.distributed.fsdp._fully_sharded_data_parallel import *  # noqa: F401,F403
from trainrun.distributed.fsdp._fully_sharded_data_parallel import FullyShardedDataParallel  # noqa: F401
