"""trainrun.utils.data against PyTorch 1.13's torch.utils.data: the same
permutations, shuffles, splits and DistributedSampler shares for the same
seeds, the same batches and collated structures, and the same refusals.
Comparisons with torch skip with a reason when it is absent."""
import collections

import numpy as np
import pytest

from built_tree import needs_torch, torch

import trainrun  # noqa: E402
from trainrun.utils import data  # noqa: E402

tdata = torch.utils.data if torch is not None else None


def as_list(batch):
    """A batch as nested Python lists/dicts of numbers, the same for either library."""
    if hasattr(batch, "tolist") and not isinstance(batch, (list, tuple, dict)):
        return batch.tolist()
    if isinstance(batch, dict):
        return {k: as_list(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [as_list(b) for b in batch]
    return batch


@needs_torch
@pytest.mark.parametrize("seed", [0, 1, 42, 2**33 + 5, 67280421310721])
def test_randperm_is_pytorchs_for_the_same_seed(seed):
    g, tg = trainrun.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    for n in (0, 1, 2, 10, 1000):  # successive calls continue the same stream
        assert trainrun.randperm(n, generator=g).tolist() == torch.randperm(n, generator=tg).tolist(), n
    assert trainrun.Generator().initial_seed() == torch.Generator().initial_seed()
    trainrun.manual_seed(7)
    torch.manual_seed(7)
    assert trainrun.randperm(20).tolist() == torch.randperm(20).tolist()
    assert trainrun.randperm(5, dtype=trainrun.int32).dtype == trainrun.int32


@needs_torch
@pytest.mark.parametrize("n", [1, 7, 10, 11, 64])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_gives_every_rank_pytorchs_share(n, shuffle, drop_last):
    for world in (1, 2, 3, 4):
        for seed, epoch in ((0, 0), (5, 3)):
            shares = []
            for rank in range(world):
                ours = data.DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed,
                                               drop_last=drop_last)
                theirs = tdata.DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle,
                                                  seed=seed, drop_last=drop_last)
                ours.set_epoch(epoch)
                theirs.set_epoch(epoch)
                got = list(ours)
                assert got == list(theirs), (world, rank, seed, epoch)
                assert len(ours) == len(theirs) == len(got)
                shares.append(got)
            # Together the ranks cover the data (all of it, unless drop_last cut the tail).
            covered = set().union(*map(set, shares))
            assert covered == set(range(n)) or (drop_last and len(covered) == world * len(shares[0]))


@needs_torch
def test_shuffled_loader_yields_pytorchs_batches_epoch_after_epoch():
    x = np.arange(46, dtype=np.float32).reshape(23, 2)
    y = np.arange(23) % 3
    ours = data.DataLoader(data.TensorDataset(trainrun.from_numpy(x), trainrun.from_numpy(y)), batch_size=5,
                           shuffle=True, generator=trainrun.Generator().manual_seed(3))
    theirs = tdata.DataLoader(tdata.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=5,
                              shuffle=True, generator=torch.Generator().manual_seed(3))
    assert len(ours) == len(theirs) == 5
    for epoch in range(3):
        a, b = [as_list(batch) for batch in ours], [as_list(batch) for batch in theirs]
        assert a == b, epoch
    ours_dropped = data.DataLoader(list(range(23)), batch_size=5, drop_last=True)
    assert [as_list(b) for b in ours_dropped] == [as_list(b) for b in tdata.DataLoader(list(range(23)), batch_size=5,
                                                                                        drop_last=True)]
    assert len(ours_dropped) == 4


@needs_torch
def test_random_sampler_with_replacement_and_more_samples_than_data():
    for replacement, num_samples in ((True, 70), (False, 25), (True, None)):
        ours = data.RandomSampler(range(10), replacement=replacement, num_samples=num_samples,
                                  generator=trainrun.Generator().manual_seed(9))
        theirs = tdata.RandomSampler(range(10), replacement=replacement, num_samples=num_samples,
                                     generator=torch.Generator().manual_seed(9))
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
    g, tg = trainrun.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    assert list(data.SubsetRandomSampler([3, 9, 27, 81], g)) == list(tdata.SubsetRandomSampler([3, 9, 27, 81], tg))


@needs_torch
def test_random_split_matches_pytorch_for_lengths_and_fractions():
    for lengths in ([3, 7], [0.3, 0.3, 0.4], [1.0], [0.25, 0.75]):
        ours = data.random_split(range(10), lengths, generator=trainrun.Generator().manual_seed(2))
        theirs = tdata.random_split(range(10), lengths, generator=torch.Generator().manual_seed(2))
        assert [list(s) for s in ours] == [list(s) for s in theirs], lengths
    with pytest.raises(ValueError, match="sum of input lengths"):
        data.random_split(range(10), [3, 3])


@needs_torch
def test_default_collate_builds_pytorchs_structures_and_dtypes():
    Point = collections.namedtuple("Point", "x y")
    samples = [{"img": np.full((2, 2), i, dtype=np.float32), "label": i, "w": 0.5 * i, "ok": i % 2 == 0,
                "name": f"s{i}", "pair": (i, [i, -i]), "pt": Point(i, 2.0 * i)} for i in range(3)]
    ours, theirs = data.default_collate(samples), tdata.default_collate(samples)
    assert set(ours) == set(theirs)
    for key in theirs:
        assert as_list(ours[key]) == as_list(theirs[key]), key
    for key in ("img", "label", "w", "ok"):
        assert str(ours[key].dtype).split(".")[1] == str(theirs[key].dtype).split(".")[1], key
    assert isinstance(ours["pt"], Point) and isinstance(ours["pair"], list)
    assert ours["name"] == ["s0", "s1", "s2"]
    tensors = [trainrun.ones([2, 3]) * i for i in range(4)]
    assert data.default_collate(tensors).shape == (4, 2, 3)
    with pytest.raises(TypeError, match="default_collate"):
        data.default_collate([object(), object()])


def test_iterable_datasets_batch_in_order_and_map_datasets_concatenate():
    class Stream(data.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in data.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in data.DataLoader(Stream(), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    assert [b for b in data.DataLoader(Stream(), batch_size=None)] == list(range(7))

    class Squares(data.Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return i * i

    both = Squares(3) + Squares(2)
    assert len(both) == 5 and [both[i] for i in range(5)] == [0, 1, 4, 0, 1] and both[-1] == 1
    sub = data.Subset(Squares(10), [9, 2])
    assert len(sub) == 2 and sub[0] == 81
    batches = list(data.DataLoader(Squares(5), batch_sampler=[[4, 0], [1]]))
    assert [b.tolist() for b in batches] == [[16, 0], [1]]


def test_bad_arguments_are_refused_by_name():
    ds = list(range(4))
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        data.DataLoader(ds, sampler=data.SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        data.DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
        data.DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        data.DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="invalid rank 3"):
        data.DistributedSampler(ds, num_replicas=3, rank=3)
    with pytest.raises(RuntimeError, match="init_process_group"):
        data.DistributedSampler(ds)
    with pytest.raises(ValueError, match="size mismatch"):
        data.TensorDataset(trainrun.ones([3]), trainrun.ones([4]))
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        data.BatchSampler(ds, 0, False)
    with pytest.raises(TypeError, match="generator must be a trainrun.Generator"):
        trainrun.randperm(3, generator=42)
    with pytest.raises(ValueError, match="non-negative"):
        trainrun.randperm(-1)


def test_distributed_sampler_reads_rank_and_world_from_the_process_group():
    import trainrun.distributed as dist
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        s = data.DistributedSampler(range(5), shuffle=False)
        assert (s.num_replicas, s.rank, list(s)) == (1, 0, [0, 1, 2, 3, 4])
    finally:
        dist.destroy_process_group()


def test_stack_dataset_pairs_items_by_position_or_name():
    xs, ys = trainrun.arange(4.0), trainrun.arange(4) * 10
    by_position = data.StackDataset(xs, ys)
    assert len(by_position) == 4 and by_position[2] == (xs[2], ys[2])
    by_name = data.StackDataset(image=xs, label=ys)
    batch = next(iter(data.DataLoader(by_name, batch_size=3)))
    assert batch["label"].tolist() == [0, 10, 20] and batch["image"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="Size mismatch"):
        data.StackDataset(xs, trainrun.arange(3))
    with pytest.raises(ValueError, match="both types are given"):
        data.StackDataset(xs, label=ys)


def test_in_order_false_is_accepted_and_batches_stay_whole():
    loader = data.DataLoader(list(range(10)), batch_size=4, in_order=False)
    assert loader.in_order is False
    assert sorted(x for batch in loader for x in batch.tolist()) == list(range(10))


def test_a_generators_state_is_a_byte_tensor_that_restores_its_draws():
    g = trainrun.Generator().manual_seed(3)
    state = g.get_state()
    assert state.dtype == trainrun.uint8 and state.dim() == 1
    first = trainrun.randperm(10, generator=g)
    g.set_state(state.clone())
    assert trainrun.equal(trainrun.randperm(10, generator=g), first) and g.initial_seed() == 3
    with pytest.raises(RuntimeError, match="input RNG state size to be 5"):
        g.set_state(trainrun.zeros(5, dtype=trainrun.uint8))
    saved = trainrun.get_rng_state()
    drawn = trainrun.randperm(6)
    trainrun.set_rng_state(saved)
    assert trainrun.equal(trainrun.randperm(6), drawn)


def test_make_tensor_draws_in_range_and_can_be_noncontiguous():
    from trainrun.testing import make_tensor
    t = make_tensor(3, 4, dtype=trainrun.float32, device="cpu", low=-1, high=1)
    assert t.shape == (3, 4) and t.min().item() >= -1 and t.max().item() < 1
    n = make_tensor((2, 5), dtype=trainrun.int64, device="cpu", low=0, high=3, noncontiguous=True, exclude_zero=True)
    assert not n.is_contiguous() and n.min().item() >= 1 and n.max().item() <= 2
    assert make_tensor(2, dtype=trainrun.float32, device="cpu", requires_grad=True).requires_grad


def test_unbatched_loading_converts_like_pytorch():
    """batch_size=None: default_convert turns NumPy arrays into tensors and a plain tuple into a list (as
    PyTorch does), keeping named tuples and mappings."""
    Point = collections.namedtuple("Point", "x y")
    converted = data.default_convert((np.ones(2, dtype=np.float32), Point(np.zeros(1), 3), {"k": (1, 2)}))
    assert isinstance(converted, list) and isinstance(converted[0], trainrun.Tensor)
    assert isinstance(converted[1], Point) and isinstance(converted[1].x, trainrun.Tensor)
    assert converted[2] == {"k": [1, 2]}
    pairs = data.TensorDataset(trainrun.arange(3), trainrun.arange(3) * 2)
    first = next(iter(data.DataLoader(pairs, batch_size=None)))
    assert isinstance(first, list) and [t.item() for t in first] == [0, 0]
