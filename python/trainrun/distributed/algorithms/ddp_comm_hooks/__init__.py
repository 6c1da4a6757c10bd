"""torch.distributed.algorithms.ddp_comm_hooks: the built-in hooks, at PyTorch's import path."""
from trainrun.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: F401
