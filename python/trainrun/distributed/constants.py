"""trainrun.distributed.constants, as torch.distributed.constants: the default collective timeouts."""
from datetime import timedelta

_DEFAULT_PG_TIMEOUT = timedelta(minutes=30)
default_pg_timeout = _DEFAULT_PG_TIMEOUT
default_pg_nccl_timeout = _DEFAULT_PG_TIMEOUT  # (PyTorch's is the same 30 minutes unless TORCH_NCCL_* says else)
