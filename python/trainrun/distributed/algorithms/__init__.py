"""trainrun.distributed.algorithms: DDP communication hooks, and Join for uneven inputs."""
from trainrun.distributed.algorithms.join import Join, JoinHook, Joinable  # noqa: F401
