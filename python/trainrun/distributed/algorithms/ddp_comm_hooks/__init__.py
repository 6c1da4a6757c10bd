"""torch.distributed.algorithms.ddp_comm_hooks: the built-in hooks, at PyTorch's import path (default_hooks:
allreduce and fp16/bf16 compression, in C++; powerSGD_hook: PowerSGD low-rank compression, in Python)."""
from trainrun.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook  # noqa: F401
