"""trainrun.distributed.algorithms: DDP communication hooks, and Join for uneven inputs."""
from trainrun.distributed.algorithms.join import Join, JoinHook, Joinable  # noqa: F401


from trainrun._module_paths import submodule_getattr as _submodule_getattr  # noqa: E402
__getattr__ = _submodule_getattr(__name__)  # (its submodules as attributes, imported when first read)
