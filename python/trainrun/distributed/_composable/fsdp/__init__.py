"""torch.distributed._composable.fsdp: FSDP2 at the path PyTorch 2.4-2.5 scripts import it from (since 2.6 it
is torch.distributed.fsdp)."""
from trainrun.distributed.fsdp import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy,  # noqa
                                       UnshardHandle, fully_shard, register_fsdp_forward_method)
