"""trainrun.distributed.optim: ZeroRedundancyOptimizer (optimizer state partitioned across ranks), as
torch.distributed.optim's."""
from trainrun.distributed.optim.zero_redundancy_optimizer import ZeroRedundancyOptimizer  # noqa: F401
