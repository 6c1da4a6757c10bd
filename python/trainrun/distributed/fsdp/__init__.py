"""trainrun.distributed.fsdp: FSDP2's fully_shard, FSDPModule,
MixedPrecisionPolicy, OffloadPolicy, CPUOffloadPolicy, UnshardHandle and
register_fsdp_forward_method, with PyTorch 2.x's names. fully_shard's API is
in _fully_shard.py, one group's collectives in _param_group.py, when they
are issued (prefetching) in _schedule.py."""
from trainrun.distributed.fsdp._fully_shard import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy,  # noqa
                                                    OffloadPolicy, UnshardHandle, fully_shard,
                                                    register_fsdp_forward_method)
