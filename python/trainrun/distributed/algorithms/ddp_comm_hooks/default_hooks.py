"""torch.distributed.algorithms.ddp_comm_hooks.default_hooks (trainrun.distributed.algorithms.default_hooks)."""
from trainrun.distributed.algorithms.default_hooks import (BUILT_IN, allreduce_hook, bf16_compress_hook,  # noqa: F401
                                                           fp16_compress_hook)
