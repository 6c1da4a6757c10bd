"""A rank of test_distributed_api: every torch.distributed call a training
script makes, through `import trainrun as torch`, checked with data that
differ per rank and per position. Prints "rank R: ok" at the end."""
import datetime
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import trainrun as torch  # noqa: E402
import trainrun.distributed as dist  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {dist.get_rank()}: {what}")


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == "gloo" and dist.is_initialized() and dist.is_available(), "backend")
    check(dist.get_world_size(dist.group.WORLD) == world, "group.WORLD")
    base = torch.arange(6).to(torch.float32)

    def mine(r=None):
        return base + 100 * (rank if r is None else r)

    # all_gather into a list, gather to 1, scatter from 2, reduce to 0.
    out = [torch.zeros([6]) for _ in range(world)]
    dist.all_gather(out, mine())
    check(all(out[r].tolist() == mine(r).tolist() for r in range(world)), "all_gather")
    gathered = [torch.zeros([6]) for _ in range(world)] if rank == 1 else None
    dist.gather(mine(), gather_list=gathered, dst=1)
    if rank == 1:
        check(all(gathered[r].tolist() == mine(r).tolist() for r in range(world)), "gather")
    piece = torch.zeros([6])
    dist.scatter(piece, scatter_list=[mine(r) * -1 for r in range(world)] if rank == 2 else None, src=2)
    check(piece.tolist() == (mine() * -1).tolist(), "scatter")
    total = mine()
    dist.reduce(total, dst=0, op=dist.ReduceOp.SUM)
    if rank == 0:
        check(total.tolist() == sum(mine(r) for r in range(world)).tolist(), "reduce")
    # reduce_scatter from a list: this rank gets the sum of everyone's entry `rank`.
    rs = torch.zeros([6])
    dist.reduce_scatter(rs, [base + 10 * r + rank for r in range(world)])
    check(rs.tolist() == sum(base + 10 * rank + r for r in range(world)).tolist(), "reduce_scatter")
    # all_to_all_single, equal and uneven splits; all_to_all of lists.
    a2a_in = torch.arange(world * 2).to(torch.float32) + 1000 * rank
    a2a_out = torch.zeros([world * 2])
    dist.all_to_all_single(a2a_out, a2a_in)
    want = [1000 * r + 2 * rank + k for r in range(world) for k in range(2)]
    check(a2a_out.tolist() == want, f"all_to_all_single {a2a_out.tolist()} vs {want}")
    in_splits = [r + 1 for r in range(world)]               # r+1 rows to rank r
    out_splits = [rank + 1] * world                          # rank+1 rows from each
    uneven_in = torch.arange(sum(in_splits)).to(torch.float32) + 1000 * rank
    uneven_out = torch.zeros([sum(out_splits)])
    dist.all_to_all_single(uneven_out, uneven_in, output_split_sizes=out_splits, input_split_sizes=in_splits)
    offset = sum(range(1, rank + 1))
    want = [1000 * r + offset + k for r in range(world) for k in range(rank + 1)]
    check(uneven_out.tolist() == want, f"uneven all_to_all_single {uneven_out.tolist()} vs {want}")
    lists_out = [torch.zeros([r + 1]) for r in range(world)]
    dist.all_to_all(lists_out, [torch.full([rank + 1], float(10 * rank + r)) for r in range(world)])
    check(all(lists_out[r].tolist() == [float(10 * r + rank)] * (r + 1) for r in range(world)), "all_to_all")
    # Point to point around the ring: isend/irecv and batch_isend_irecv.
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros([6])
    works = [dist.isend(mine(), right), dist.irecv(got, left)]
    for w in works:
        w.wait(timeout=datetime.timedelta(seconds=30))
    check(got.tolist() == mine(left).tolist(), "isend/irecv")
    got2 = torch.zeros([6])
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, mine() * 2, right),
                                     dist.P2POp(dist.irecv, got2, left)]):
        w.wait()
    check(got2.tolist() == (mine(left) * 2).tolist(), "batch_isend_irecv")
    # async_op with a timedelta wait.
    t = mine()
    dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True).wait(timeout=datetime.timedelta(seconds=30))
    check(t.tolist() == mine(world - 1).tolist(), "async all_reduce MAX")
    # Objects.
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "tag": "x" * rank})
    check(objs == [{"rank": r, "tag": "x" * r} for r in range(world)], f"all_gather_object {objs}")
    shared = [rank, f"from {rank}", None] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(shared, src=1)
    check(shared == [1, "from 1", None], "broadcast_object_list")
    collected = [None] * world if rank == 0 else None
    dist.gather_object(("r", rank), collected, dst=0)
    if rank == 0:
        check(collected == [("r", r) for r in range(world)], "gather_object")
    received = [None]
    dist.scatter_object_list(received, [f"to {r}" for r in range(world)] if rank == 0 else None, src=0)
    check(received == [f"to {rank}"], "scatter_object_list")
    sub = dist.new_group([0, 1])
    if rank in (0, 1):
        s = mine()
        dist.all_reduce(s, group=sub)
        check(s.tolist() == (mine(0) + mine(1)).tolist() and dist.get_world_size(sub) == 2, "new_group")
    # Global ranks of a group, a group with its own timeout, and subgroups that cover the world.
    check(dist.get_process_group_ranks(None) == list(range(world)), "get_process_group_ranks(WORLD)")
    tail = dist.new_group([2, 1], timeout=datetime.timedelta(seconds=7))
    if rank in (1, 2):
        check(dist.get_process_group_ranks(tail) == [2, 1] and tail.rank() == [2, 1].index(rank), "group ranks")
        check(dist.get_global_rank(tail, 0) == 2 and dist.get_group_rank(tail, 1) == 1, "global/group rank")
        check(abs(tail.timeout_seconds() - 7.0) < 1e-6, "new_group timeout")
        t = torch.ones(1) * rank
        dist.all_reduce(t, group=tail)
        check(t.item() == 3.0, "all_reduce on [2, 1]")
    else:
        check(tail is None, "a non-member gets None")
    mine_sub, subs = dist.new_subgroups_by_enumeration([[0], [1, 2]])
    check(len(subs) == 2 and dist.get_process_group_ranks(mine_sub) == ([0] if rank == 0 else [1, 2]),
          "new_subgroups_by_enumeration")
    try:
        dist.new_subgroups(group_size=2)
        check(False, "new_subgroups accepted a size that does not divide 3")
    except ValueError:
        pass
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    print(f"rank {rank}: ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
