"""trainrun.distributed.fsdp: FSDP2's fully_shard, FSDPModule,
MixedPrecisionPolicy, OffloadPolicy and CPUOffloadPolicy, with PyTorch 2.x's
names (see _fully_shard.py and _param_group.py)."""
from trainrun.distributed.fsdp._fully_shard import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy,  # noqa
                                                    OffloadPolicy, fully_shard)
