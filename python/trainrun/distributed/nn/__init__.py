"""trainrun.distributed.nn: collectives that autograd sees through (torch.distributed.nn.functional)."""
from trainrun.distributed.nn import functional  # noqa: F401
from trainrun.distributed.nn.functional import (all_gather, all_reduce, all_to_all, all_to_all_single,  # noqa: F401
                                                broadcast, gather, reduce, reduce_scatter, scatter)
