"""PyTorch's rank arguments on 4 ranks through the launcher: src/dst of broadcast, reduce, gather, scatter,
send/recv, P2POp and the object collectives are global ranks also on a subgroup (group_src/group_dst name a rank
within it, as PyTorch 2.6's), recv without src takes whichever rank sends first and returns its rank; and the
stores' PyTorch surface: timedelta timeouts, compare_set, append, multi_get/multi_set, set_timeout."""
import datetime

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def global_ranks_on_a_subgroup():
    from trainrun import distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    upper = dist.new_group([2, 3])  # (global rank 3 is its rank 1)
    if rank in (2, 3):
        x = torch.full([2], float(rank))
        dist.broadcast(x, src=3, group=upper)
        assert x.tolist() == [3.0, 3.0]
        y = torch.full([1], float(rank))
        dist.broadcast(y, group=upper, group_src=0)
        assert y.tolist() == [2.0]
        total = torch.ones(1) * rank
        dist.reduce(total, dst=3, group=upper)
        if rank == 3:
            assert total.item() == 5.0
        pieces = [torch.zeros(1) for _ in range(2)] if rank == 3 else None
        dist.gather(torch.full([1], float(rank)), pieces, dst=3, group=upper)
        if rank == 3:
            assert [p.item() for p in pieces] == [2.0, 3.0]
        mine = torch.zeros(1)
        dist.scatter(mine, [torch.full([1], 20.0), torch.full([1], 30.0)] if rank == 3 else None, src=3, group=upper)
        assert mine.item() == rank * 10
        if rank == 2:
            dist.send(torch.full([3], 7.0), dst=3, group=upper)
        else:
            got = torch.zeros(3)
            assert dist.recv(got, src=2, group=upper) == 2 and got.tolist() == [7.0] * 3
        other = 5 - rank
        out, back = torch.full([1], float(rank)), torch.zeros(1)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, other, upper),
                                        dist.P2POp(dist.irecv, back, other, upper)])
        [w.wait() for w in works]
        assert back.item() == other
        objects = [None, None]
        dist.broadcast_object_list([{"from": 2}, "x"] if rank == 2 else objects, src=2, group=upper)
        if rank == 3:
            assert objects == [{"from": 2}, "x"]
        with pytest.raises(ValueError, match="src=0 is not a member of the group \\(its global ranks are \\[2, 3\\]"):
            dist.broadcast(x, src=0, group=upper)
        with pytest.raises(ValueError, match="give src or group_src, not both"):
            dist.broadcast(x, src=2, group=upper, group_src=0)
    # recv without src: the first sender, whichever; its global rank comes back.
    if rank == 0:
        senders = sorted(dist.recv(torch.zeros(1)) for _ in range(3))
        assert senders == [1, 2, 3]
    else:
        dist.send(torch.ones(1), dst=0)
    if rank == 1:
        work = dist.irecv(torch.zeros(1), src=0, tag=9)  # (nothing is sent: the wait's timeout ends it)
        with pytest.raises(TimeoutError):
            work.wait(timeout=datetime.timedelta(milliseconds=300))
    dist.barrier()
    dist.destroy_process_group()


def test_src_and_dst_are_global_ranks_on_subgroups(ranks):
    ranks.run_function(4, global_ranks_on_a_subgroup)


def test_master_listen_fd_as_pytorchs_tcpstore_tutorial():
    """PyTorch's libuv TCPStore tutorial: a socket handed in is refused by the libuv backend (the default) and
    served with use_libuv=False; a wait that times out raises torch._C._DistStoreError, a RuntimeError."""
    import socket
    import trainrun
    from trainrun import distributed as dist
    listen_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listen_sock.bind(("localhost", 0))
    addr, port, *_ = listen_sock.getsockname()
    listen_fd = listen_sock.detach()
    with pytest.raises(NotImplementedError, match="pass use_libuv=False"):
        dist.TCPStore(addr, port, 1, True, master_listen_fd=listen_fd)
    store = dist.TCPStore(addr, port, 1, True, master_listen_fd=listen_fd, use_libuv=False)
    assert store.port == port and not store.libuvBackend
    client = dist.TCPStore(addr, port, is_master=False, timeout=datetime.timedelta(seconds=5))
    client.set("a", "b")
    assert store.get("a") == b"b"
    assert dist.DistStoreError is trainrun._C._DistStoreError and issubclass(dist.DistStoreError, RuntimeError)
    with pytest.raises(trainrun._C._DistStoreError):
        store.wait(["never"], datetime.timedelta(milliseconds=100))


def test_stores_take_timedeltas_and_have_pytorchs_methods(tmp_path):
    from trainrun import distributed as dist
    server = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=datetime.timedelta(seconds=10),
                           wait_for_workers=False, multi_tenant=True, use_libuv=True)
    client = dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=datetime.timedelta(seconds=5))
    # (server and client share their keys: each store gets keys of its own)
    stores = (server, client, dist.HashStore(), dist.FileStore(str(tmp_path / "store"), 1),
              dist.PrefixStore("p", dist.HashStore()))
    for i, store in enumerate(stores):
        store.set("k", "v")
        c, a = f"c{i}", f"a{i}"
        assert store.compare_set(c, "", "first") == b"first"  # (absent, expected empty: set)
        assert store.compare_set(c, "other", "second") == b"first"  # (a mismatch: unchanged, the current value)
        assert store.compare_set(c, "first", "second") == b"second"
        store.append(a, "x")
        store.append(a, b"y")
        assert store.get(a) == b"xy"
        store.multi_set(["m1", "m2"], ["1", b"2"])
        assert store.multi_get(["m1", "m2", "k"]) == [b"1", b"2", b"v"]
        store.set_timeout(datetime.timedelta(milliseconds=200))
        assert store.timeout == datetime.timedelta(milliseconds=200)
        with pytest.raises(TimeoutError):
            store.wait(["never"])
        with pytest.raises(TimeoutError):
            store.wait(["never"], datetime.timedelta(milliseconds=100))
    assert server.libuvBackend
    with pytest.raises(ValueError, match="must not be negative"):
        dist.HashStore().set_timeout(-1.0)
