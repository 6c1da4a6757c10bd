"""Whether a plain tensor meeting a DTensor counts as replicated (experimental.implicit_replication), and
that conversion."""
_STATE = {"on": False}


def replicated_like(x, dtensor):
    """x as a DTensor replicated over dtensor's mesh when implicit replication is on; x itself otherwise."""
    from trainrun import _C
    from trainrun.distributed.tensor._dtensor import DTensor
    from trainrun.distributed.tensor.placement_types import Replicate
    if not _STATE["on"] or not _C._is_cpp_tensor(x):
        return x
    mesh = dtensor.device_mesh
    return DTensor.from_local(x, mesh, [Replicate()] * mesh.ndim)
