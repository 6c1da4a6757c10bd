"""trainrun.distributed.algorithms: DDP communication hooks."""
