"""torch.distributed.tensor._utils: PyTorch's helpers for the geometry of a DTensor's pieces, which checkpoint
and sharding code outside PyTorch imports by this path. They answer from the same computation DTensor itself
uses (_redistribute.local_shape: torch.chunk's uneven split, outer mesh dims first)."""
from trainrun.distributed.tensor._redistribute import local_shape
from trainrun.distributed.tensor.placement_types import Shard, normalize
from trainrun._size import Size


def compute_local_shape_and_global_offset(global_shape, mesh, placements):
    """(shape of this rank's piece, its offset in the global tensor), as tuples; a rank outside the mesh holds
    nothing: ((0, ...), ())."""
    global_shape = tuple(int(s) for s in global_shape)
    if mesh.get_coordinate() is None:
        return (0,) * len(global_shape), ()
    shape, offset = local_shape(global_shape, mesh, normalize(list(placements), len(global_shape)))
    return tuple(shape), tuple(offset)


def compute_global_tensor_info(tensor, mesh, placements):
    """([global shape], [global stride]) of the DTensor whose local piece is `tensor` (even shards): each sharded
    dim grows by its mesh dim's size, and so do the strides of the other dims laid out outside it."""
    shape, stride = list(tensor.shape), list(tensor.stride())
    for mesh_dim, p in enumerate(normalize(list(placements), tensor.dim())):
        if isinstance(p, Shard):
            n = mesh.size(mesh_dim)
            inner = stride[p.dim]
            shape[p.dim] *= n
            stride = [s * n if d != p.dim and s >= inner else s for d, s in enumerate(stride)]
    return shape, stride


def normalize_to_torch_size(size):
    """A size given as an int, a sequence, or sizes as varargs' tuple, as a torch.Size."""
    if isinstance(size, int):
        return Size([size])
    if len(size) == 1 and not isinstance(size[0], int):
        size = size[0]
    return Size(list(size))
