"""torch.distributed.nn.functional on 2 ranks through the launcher: each collective's value, and each rank's
gradient equal to the sum over ranks of what every rank's loss asks of its input (worked out by hand from the
weights each rank uses)."""
import datetime

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def collectives_have_gradients():
    from trainrun import distributed as dist
    from trainrun.distributed.nn import functional as fn
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    base = torch.arange(1.0, 4.0)

    def weight(r):
        return torch.full([3], float(r + 2))

    def leaf(scale):
        return (base * scale).requires_grad_(True)

    # all_gather: every rank's loss reads every piece, so a piece's gradient is the sum of the weights.
    x = leaf(rank + 1)
    gathered = fn.all_gather(x)
    assert [g.tolist() for g in gathered] == [(base * (r + 1)).tolist() for r in range(world)]
    (torch.cat(gathered) * torch.cat([weight(rank) * (j + 1) for j in range(world)])).sum().backward()
    assert x.grad.tolist() == (sum(weight(r) for r in range(world)) * (rank + 1)).tolist()
    # all_reduce(SUM)
    x = leaf(rank + 1)
    total = fn.all_reduce(x)
    assert total.tolist() == (base * sum(r + 1 for r in range(world))).tolist()
    (total * weight(rank)).sum().backward()
    assert x.grad.tolist() == sum(weight(r) for r in range(world)).tolist()
    # broadcast from rank 1: the gradients sum there; rank 0's input gets none
    x = leaf(rank + 1)
    (fn.broadcast(x, 1) * weight(rank)).sum().backward()
    expected = sum(weight(r) for r in range(world)) if rank == 1 else torch.zeros(3)
    assert x.grad.tolist() == expected.tolist()
    # reduce to rank 0: rank 0's loss reaches every rank's input
    x = leaf(rank + 1)
    reduced = fn.reduce(x, 0)
    (reduced * (weight(0) if rank == 0 else torch.zeros(3))).sum().backward()
    assert x.grad.tolist() == weight(0).tolist()
    # scatter from rank 0: rank r's loss reaches piece r of rank 0's list
    pieces = [leaf(j + 1) for j in range(world)]
    mine = fn.scatter(pieces, 0)
    assert mine.tolist() == (base * (rank + 1)).tolist()
    (mine * weight(rank)).sum().backward()
    if rank == 0:
        assert [p.grad.tolist() for p in pieces] == [weight(j).tolist() for j in range(world)]
    # gather to rank 1: rank 1's loss reaches every rank's input
    x = leaf(rank + 1)
    got = fn.gather(x, 1)
    loss = sum((g * weight(j)).sum() for j, g in enumerate(got)) if rank == 1 else sum(g.sum() for g in got) * 0
    loss.backward()
    assert x.grad.tolist() == weight(rank).tolist()
    # reduce_scatter: piece r of every rank's list sums onto rank r
    inputs = [leaf(rank + j + 1) for j in range(world)]
    out = fn.reduce_scatter(torch.empty(3), inputs)
    assert out.tolist() == (base * sum(r + rank + 1 for r in range(world))).tolist()
    (out * weight(rank)).sum().backward()
    assert [t.grad.tolist() for t in inputs] == [weight(j).tolist() for j in range(world)]
    # all_to_all: rank i's piece j goes to rank j; its gradient comes from rank j's loss
    inputs = [leaf(10 * rank + j + 1) for j in range(world)]
    outs = fn.all_to_all([torch.empty(3) for _ in range(world)], inputs)
    assert [o.tolist() for o in outs] == [(base * (10 * i + rank + 1)).tolist() for i in range(world)]
    sum((o * weight(rank) * (i + 1)).sum() for i, o in enumerate(outs)).backward()
    assert [t.grad.tolist() for t in inputs] == [(weight(j) * (rank + 1)).tolist() for j in range(world)]
    # all_to_all_single with uneven splits: rank 0 sends 1 then 2 rows, rank 1 sends 2 then 1
    rows = torch.arange(3.0).reshape(3, 1) + 10 * rank
    rows.requires_grad_(True)
    sizes = [[1, 2], [2, 1]]
    incoming = [sizes[i][rank] for i in range(world)]
    got = fn.all_to_all_single(torch.empty(sum(incoming), 1), rows, incoming, sizes[rank])
    (got * (rank + 1)).sum().backward()
    assert rows.grad.reshape([-1]).tolist() == [1.0] * sizes[rank][0] + [2.0] * sizes[rank][1]
    dist.destroy_process_group()


def test_differentiable_collectives(ranks):
    ranks.run_function(2, collectives_have_gradients)
