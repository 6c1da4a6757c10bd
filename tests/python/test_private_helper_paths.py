"""PyTorch's private helpers that training code imports by path: torch._utils (device lookups, the dense
flatten/unflatten pair, _take_tensors) against PyTorch 1.13's where it has them, and
torch.distributed.tensor._utils (a DTensor piece's shape and offset, the global shape and stride of a local
piece) on a 2 x 2 mesh through the launcher, checked against the pieces distribute_tensor makes."""
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402


def test_device_lookups():
    from trainrun import _utils
    assert _utils._get_available_device_type() == ("cuda" if trainrun.cuda.is_available() else None)
    assert _utils._get_device_module("cuda") is trainrun.cuda and _utils._get_device_module("cpu") is trainrun.cpu
    assert _utils._get_device_index(3) == 3 and _utils._get_device_index("cuda:1") == 1
    assert _utils._get_device_index(trainrun.device("cpu"), allow_cpu=True) == -1
    with pytest.raises(ValueError, match="Expected a non cpu device, but got: cpu"):
        _utils._get_device_index("cpu")
    with pytest.raises(ValueError, match="with a specified index"):
        _utils._get_device_index("cuda")
    with pytest.raises(RuntimeError, match="no device module 'tpu'"):
        _utils._get_device_module("tpu")
    assert trainrun._utils is _utils  # reachable as an attribute too, as torch._utils is


@needs_torch
def test_flatten_unflatten_and_take_tensors_equal_pytorch():
    from trainrun import _utils
    from torch import _utils as theirs
    shapes = [(2, 3), (4,), (1, 1, 2)]
    ours_in = [trainrun.arange(int(trainrun.tensor(s).prod()), dtype=trainrun.float32).view(*s) + i
               for i, s in enumerate(shapes)]
    theirs_in = [peer.tensor(t.tolist()) for t in ours_in]
    flat, flat_peer = _utils._flatten_dense_tensors(ours_in), theirs._flatten_dense_tensors(theirs_in)
    assert flat.tolist() == flat_peer.tolist()
    back = _utils._unflatten_dense_tensors(flat * 2, ours_in)
    assert [b.tolist() for b in back] == [b.tolist() for b in theirs._unflatten_dense_tensors(flat_peer * 2, theirs_in)]
    flat2 = flat.clone()  # the pieces are views of the flat buffer
    _utils._unflatten_dense_tensors(flat2, ours_in)[1].fill_(-1)
    assert flat2[6:10].tolist() == [-1.0] * 4
    mixed = [trainrun.ones(4), trainrun.ones(2, dtype=trainrun.float64), trainrun.ones(4), trainrun.ones(8),
             trainrun.ones(3, dtype=trainrun.float64)]
    mixed_peer = [peer.ones(4), peer.ones(2, dtype=peer.float64), peer.ones(4), peer.ones(8),
                  peer.ones(3, dtype=peer.float64)]
    ours_groups = [[t.numel() for t in g] for g in _utils._take_tensors(mixed, 32)]
    assert ours_groups == [[t.numel() for t in g] for g in theirs._take_tensors(mixed_peer, 32)]


def dtensor_geometry():
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import init_device_mesh
    from trainrun.distributed.tensor import Replicate, Shard, distribute_tensor
    from trainrun.distributed.tensor._utils import (compute_global_tensor_info,
                                                     compute_local_shape_and_global_offset, normalize_to_torch_size)
    mesh = init_device_mesh("cpu", (2, 2))
    whole = trainrun.arange(7 * 6, dtype=trainrun.float32).view(7, 6)
    for placements in ([Shard(0), Shard(1)], [Shard(0), Shard(0)], [Replicate(), Shard(-1)], [Shard(1), Replicate()]):
        shape, offset = compute_local_shape_and_global_offset((7, 6), mesh, placements)
        local = distribute_tensor(whole, mesh, placements).to_local()
        assert shape == tuple(local.shape), (placements, shape, local.shape)
        piece = whole[offset[0]:offset[0] + shape[0], offset[1]:offset[1] + shape[1]]
        assert trainrun.equal(piece, local), (placements, offset)
    # A local piece's global shape and stride: even shards of a contiguous [8, 6] and of its transpose.
    piece = trainrun.zeros(4, 3)
    assert compute_global_tensor_info(piece, mesh, [Shard(0), Shard(1)]) == ([8, 6], [6, 1])
    assert compute_global_tensor_info(piece.t(), mesh, [Shard(0), Replicate()]) == ([6, 4], [1, 6])
    assert normalize_to_torch_size(5) == trainrun.Size([5]) and normalize_to_torch_size((2, 3)) == (2, 3)
    dist.destroy_process_group()


def test_dtensor_geometry_on_four_ranks(ranks):
    ranks.run_function(4, dtensor_geometry)
