"""torch.distributed's error classes (a store's timeout is a DistStoreError, a collective's a DistBackendError,
both RuntimeErrors and TimeoutErrors), send_object_list/recv_object_list, split_group, get_pg_count and the
backend queries, on 4 ranks through the launcher where they need ranks."""
import datetime

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun import distributed as dist  # noqa: E402


def test_error_classes_form_pytorchs_hierarchy():
    assert issubclass(dist.DistError, RuntimeError)
    for cls in (dist.DistBackendError, dist.DistStoreError, dist.DistNetworkError):
        assert issubclass(cls, dist.DistError)


@pytest.mark.parametrize("make", ["hash", "tcp", "file"])
def test_store_timeout_is_a_dist_store_error_and_a_timeout_error(make, tmp_path):
    if make == "hash":
        store = dist.HashStore()
    elif make == "tcp":
        store = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, wait_for_workers=False)
    else:
        store = dist.FileStore(str(tmp_path / "store"), 1)
    store.set_timeout(datetime.timedelta(milliseconds=100))
    with pytest.raises(dist.DistStoreError, match="never") as caught:
        store.get("never")
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, RuntimeError)
    assert not isinstance(caught.value, dist.DistBackendError)


def test_backend_queries():
    assert dist.is_backend_available("gloo") and not dist.is_backend_available("mpi")
    assert not dist.is_mpi_available() and not dist.is_xccl_available()
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device(torch.device("cuda", 0)) == "nccl"
    with pytest.raises(ValueError, match="'xla'"):
        dist.get_default_backend_for_device("xla")
    assert dist.reduce_op.SUM == dist.ReduceOp.SUM


def objects_between_ranks():
    from trainrun import distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    assert dist.get_pg_count() == 1
    assert dist.get_backend_config() == "cpu:gloo"
    assert dist.DeviceMesh is dist.device_mesh.DeviceMesh and dist.init_device_mesh is not None
    # send_object_list / recv_object_list: 0 -> 3 by global rank, then within a subgroup of [1, 3].
    if rank == 0:
        dist.send_object_list([{"step": 7}, "text", torch.arange(3.0), None], dst=3)
    if rank == 3:
        got = [None] * 4
        assert dist.recv_object_list(got, src=0) == 0
        assert got[0] == {"step": 7} and got[1] == "text" and got[2].tolist() == [0.0, 1.0, 2.0] and got[3] is None
    odd = dist.new_group([1, 3])
    assert dist.get_pg_count() == 2
    if rank == 1:
        dist.send_object_list(["a" * 5000], group=odd, group_dst=1)
    if rank == 3:
        got = [None]
        assert dist.recv_object_list(got, group=odd) == 1  # (any sender: its global rank comes back)
        assert got == ["a" * 5000]
    if rank == 2:
        with pytest.raises(ValueError, match="dst is this rank"):
            dist.send_object_list([1], dst=2)
    # split_group: disjoint groups of global ranks; each rank gets its own.
    mine = dist.split_group(split_ranks=[[0, 2], [1, 3]])
    assert dist.get_process_group_ranks(mine) == ([0, 2] if rank % 2 == 0 else [1, 3])
    total = torch.full([1], float(rank))
    dist.all_reduce(total, group=mine)
    assert total.item() == (2.0 if rank % 2 == 0 else 4.0)
    # A collective's timeout: a DistBackendError, also a TimeoutError.
    if rank == 1:
        work = dist.irecv(torch.zeros(1), src=0, tag=5)  # (nothing is sent)
        with pytest.raises(dist.DistBackendError) as caught:
            work.wait(timeout=datetime.timedelta(milliseconds=300))
        assert isinstance(caught.value, TimeoutError)
    dist.barrier()
    dist.destroy_process_group()
    assert dist.get_pg_count() == 0


def test_objects_between_ranks_and_split_group(ranks):
    ranks.run_function(4, objects_between_ranks)
